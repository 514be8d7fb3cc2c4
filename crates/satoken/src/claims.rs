//! The claims of both kinds of token, field for field as upstream writes them.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How far a token's times may be off (go-jose's `DefaultLeeway`, which upstream relies on).
const LEEWAY_SECONDS: i64 = 60;

/// A named object and its uid (upstream's private `ref`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference to `name` with `uid`.
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// What a bound token is bound to besides its ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// A Pod: the token dies with it.
    Pod(ObjectRef),
    /// A Secret: the token dies with it.
    Secret(ObjectRef),
}

/// The `kubernetes.io` claim of a bound token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kubernetes {
    /// The ServiceAccount's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The ServiceAccount.
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// The Pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The Secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// When a token whose lifetime the server extended would have expired (Unix seconds): uses
    /// after it are stale (upstream's `--service-account-extend-token-expiration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// A bound token's claims (upstream's `jwt.Claims` with its `privateClaims`); fields in the
/// order go-jose writes them (sorted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundClaims {
    /// The audiences the token is meant for.
    #[serde(
        default,
        serialize_with = "one_or_many",
        deserialize_with = "string_or_list"
    )]
    pub aud: Vec<String>,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// Issued at, Unix seconds.
    pub iat: i64,
    /// The issuer.
    pub iss: String,
    /// The ServiceAccount, its namespace, and what the token is bound to.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: Kubernetes,
    /// Not before, Unix seconds.
    pub nbf: i64,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
}

impl BoundClaims {
    /// The claims of a token for the ServiceAccount `namespace`/`account`, issued by `issuer` at
    /// `now` for `audiences`, valid for `expiration_seconds`, bound to `binding`. A non-zero
    /// `warn_after_seconds` marks the point after which an extended token counts as stale.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        issuer: &str,
        namespace: &str,
        account: ObjectRef,
        binding: Option<Binding>,
        audiences: Vec<String>,
        now: i64,
        expiration_seconds: i64,
        warn_after_seconds: i64,
    ) -> Self {
        let (pod, secret) = match binding {
            Some(Binding::Pod(r)) => (Some(r), None),
            Some(Binding::Secret(r)) => (None, Some(r)),
            None => (None, None),
        };
        Self {
            aud: audiences,
            exp: now.saturating_add(expiration_seconds),
            iat: now,
            iss: issuer.to_string(),
            kubernetes: Kubernetes {
                namespace: namespace.to_string(),
                serviceaccount: account.clone(),
                pod,
                secret,
                warnafter: (warn_after_seconds != 0)
                    .then(|| now.saturating_add(warn_after_seconds)),
            },
            nbf: now,
            sub: crate::username(namespace, &account.name),
        }
    }

    /// Whether the token is within its lifetime at `now` (upstream's validator, with go-jose's
    /// leeway and its order of checks); the error is upstream's message.
    pub fn check_time(&self, now: i64) -> Result<(), &'static str> {
        if now + LEEWAY_SECONDS < self.nbf {
            return Err("service account token is not valid yet");
        }
        if now - LEEWAY_SECONDS > self.exp {
            return Err("service account token has expired");
        }
        if now + LEEWAY_SECONDS < self.iat {
            return Err("service account token is issued in the future");
        }
        Ok(())
    }
}

/// A legacy (Secret-based) token's claims (upstream's `LegacyClaims`), in go-jose's order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyClaims {
    /// Always [`crate::LEGACY_ISSUER`].
    pub iss: String,
    /// The ServiceAccount's namespace.
    #[serde(rename = "kubernetes.io/serviceaccount/namespace", default)]
    pub namespace: String,
    /// The Secret that holds the token.
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name", default)]
    pub secret_name: String,
    /// The ServiceAccount's name.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name", default)]
    pub service_account_name: String,
    /// The ServiceAccount's uid.
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid", default)]
    pub service_account_uid: String,
    /// `system:serviceaccount:NS:NAME`.
    #[serde(default)]
    pub sub: String,
}

impl LegacyClaims {
    /// The claims of the token the Secret `secret_name` holds for the ServiceAccount
    /// `namespace`/`account`.
    pub fn new(namespace: &str, account: &ObjectRef, secret_name: &str) -> Self {
        Self {
            iss: crate::LEGACY_ISSUER.to_string(),
            namespace: namespace.to_string(),
            secret_name: secret_name.to_string(),
            service_account_name: account.name.clone(),
            service_account_uid: account.uid.clone(),
            sub: crate::username(namespace, &account.name),
        }
    }

    /// Upstream's checks of the claims themselves, in its order, with its messages.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.sub.is_empty() {
            return Err("sub claim is missing");
        }
        if self.namespace.is_empty() {
            return Err("namespace claim is missing");
        }
        if self.secret_name.is_empty() {
            return Err("secretName claim is missing");
        }
        if self.service_account_name.is_empty() {
            return Err("serviceAccountName claim is missing");
        }
        if self.service_account_uid.is_empty() {
            return Err("serviceAccountUID claim is missing");
        }
        match crate::split_username(&self.sub) {
            Some((ns, name)) if ns == self.namespace && name == self.service_account_name => Ok(()),
            _ => Err("sub claim is invalid"),
        }
    }
}

/// The `iss` claim of what looks like a JWT, read without checking the signature: upstream asks
/// this first, so that a token of another issuer is left to the other authenticators.
pub fn issuer_of(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    #[derive(Deserialize)]
    struct Issuer {
        iss: String,
    }
    serde_json::from_slice::<Issuer>(&payload)
        .ok()
        .map(|i| i.iss)
}

/// go-jose writes a single audience as a string, several as a list.
fn one_or_many<S: Serializer>(aud: &[String], s: S) -> Result<S::Ok, S::Error> {
    match aud {
        [one] => s.serialize_str(one),
        many => many.serialize(s),
    }
}

fn string_or_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(s) => vec![s],
        Aud::Many(v) => v,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_claims() -> BoundClaims {
        BoundClaims::new(
            crate::DEFAULT_ISSUER,
            "ns",
            ObjectRef::new("sa", "sa-uid"),
            Some(Binding::Pod(ObjectRef::new("p", "p-uid"))),
            vec!["api".into()],
            1000,
            3600,
            0,
        )
    }

    #[test]
    fn bound_claims_are_upstreams() {
        let v = serde_json::to_value(pod_claims()).unwrap();
        assert_eq!(
            v,
            json!({
                "aud": "api",
                "exp": 4600,
                "iat": 1000,
                "iss": "https://kubernetes.default.svc.cluster.local",
                "kubernetes.io": {
                    "namespace": "ns",
                    "pod": {"name": "p", "uid": "p-uid"},
                    "serviceaccount": {"name": "sa", "uid": "sa-uid"},
                },
                "nbf": 1000,
                "sub": "system:serviceaccount:ns:sa",
            })
        );
        let back: BoundClaims = serde_json::from_value(v).unwrap();
        assert_eq!(back, pod_claims());
        let mut two = pod_claims();
        two.aud.push("other".into());
        assert_eq!(
            serde_json::to_value(&two).unwrap()["aud"],
            json!(["api", "other"])
        );
    }

    #[test]
    fn times_are_checked_with_leeway_in_upstreams_order() {
        let c = pod_claims();
        assert_eq!(c.check_time(1000), Ok(()));
        assert_eq!(c.check_time(4660), Ok(()));
        assert_eq!(c.check_time(4661), Err("service account token has expired"));
        assert_eq!(c.check_time(940), Ok(()));
        assert_eq!(
            c.check_time(939),
            Err("service account token is not valid yet")
        );
        let mut future = pod_claims();
        future.nbf = 0;
        assert_eq!(
            future.check_time(939),
            Err("service account token is issued in the future")
        );
    }

    #[test]
    fn legacy_claims_are_upstreams() {
        let c = LegacyClaims::new("ns", &ObjectRef::new("sa", "u1"), "sa-token");
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({
                "iss": "kubernetes/serviceaccount",
                "kubernetes.io/serviceaccount/namespace": "ns",
                "kubernetes.io/serviceaccount/secret.name": "sa-token",
                "kubernetes.io/serviceaccount/service-account.name": "sa",
                "kubernetes.io/serviceaccount/service-account.uid": "u1",
                "sub": "system:serviceaccount:ns:sa",
            })
        );
        assert_eq!(c.check(), Ok(()));
        let mut other = c.clone();
        other.sub = "system:serviceaccount:ns:someone-else".into();
        assert_eq!(other.check(), Err("sub claim is invalid"));
        let mut no_uid = c;
        no_uid.service_account_uid.clear();
        assert_eq!(no_uid.check(), Err("serviceAccountUID claim is missing"));
    }

    #[test]
    fn issuer_is_read_from_the_payload() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"iss":"kubernetes/serviceaccount"}"#);
        assert_eq!(
            issuer_of(&format!("h.{payload}.s")).as_deref(),
            Some("kubernetes/serviceaccount")
        );
        assert_eq!(issuer_of("not-a-jwt"), None);
        assert_eq!(issuer_of(&format!("h.{payload}.s.x")), None);
        assert_eq!(issuer_of("h.!!.s"), None);
    }
}
