//! ServiceAccount tokens: TokenRequest (`serviceaccounts/token`, upstream's
//! `pkg/registry/core/serviceaccount/storage/token.go`) issues them, and the authenticator checks
//! them as upstream's `pkg/serviceaccount` does (`jwt.go`'s audiences, `claims.go`'s validator of
//! bound tokens, `legacy.go`'s of Secret-based ones): signature, times, audiences, then that the
//! ServiceAccount and the Pod or Secret the token names still exist with the uids it names.

use crate::{
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Review},
    request::{self, Target},
    rest::json_response,
    state::ApiServer,
};
use api::field::FieldError;
use authz::UserInfo;
use axum::{
    http::{HeaderMap, StatusCode},
    response::Response,
};
use bytes::Bytes;
use satoken::{Binding, BoundClaims, LegacyClaims, ObjectRef};
use serde_json::{Value, json};

/// The issuer of the tokens this server signs (`--service-account-issuer`).
pub(crate) const ISSUER: &str = satoken::DEFAULT_ISSUER;

/// TokenRequest's `expirationSeconds` when the request leaves it out.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The lifetime kubelet asks for its projected tokens; with `--service-account-extend-token-
/// expiration` (on by default) upstream issues such pod-bound tokens for a year instead and marks
/// when they would have expired, so that old clients that never reread their token keep working.
const WARN_ONLY_EXPIRATION_SECONDS: i64 = 60 * 60 + 7;

/// What an extended token lives for.
const EXTENDED_EXPIRATION_SECONDS: i64 = 24 * 365 * 60 * 60;

/// A bearer token's owner, and the audiences it was accepted for.
#[derive(Clone, Debug)]
pub(crate) struct Authenticated {
    /// Who the token says the caller is.
    pub user: UserInfo,
    /// Those of the wanted audiences the token is for.
    pub audiences: Vec<String>,
}

/// The audiences the API server itself answers to (`--api-audiences`, which defaults to the
/// issuer).
pub(crate) fn api_audiences() -> Vec<String> {
    vec![ISSUER.to_string()]
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quoted_list(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| json!(s).to_string()).collect();
    format!("[{}]", items.join(" "))
}

/// Whether an object marked for deletion is past upstream's grace (go-jose's one-minute leeway):
/// a token bound to it stops working once its deletion timestamp is more than a minute old.
fn deleted_before_leeway(obj: &Value, now: i64) -> bool {
    object::path(obj, "metadata.deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| t.as_second() < now - 60)
}

fn uid(obj: &Value) -> &str {
    object::path(obj, "metadata.uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl ApiServer {
    /// The ServiceAccount token authenticators (bound, then legacy) for a token meant for
    /// `audiences` (empty: the API server's own): `None` when the token is not a JWT of an issuer
    /// this server knows.
    pub(crate) fn verify_service_account_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<Result<Authenticated, String>> {
        let key = self.service_account_key.as_ref()?;
        let issuer = satoken::issuer_of(token)?;
        let now = clock::now().as_second();
        let wanted = if audiences.is_empty() {
            api_audiences()
        } else {
            audiences.to_vec()
        };
        if issuer == satoken::LEGACY_ISSUER {
            Some(self.verify_legacy(key.verify::<LegacyClaims>(token), token, &wanted))
        } else if issuer == ISSUER {
            Some(self.verify_bound(key.verify::<BoundClaims>(token), &wanted, now))
        } else {
            None
        }
    }

    fn verify_bound(
        &self,
        claims: Result<BoundClaims, satoken::VerifyError>,
        wanted: &[String],
        now: i64,
    ) -> Result<Authenticated, String> {
        let claims = claims.map_err(|e| e.to_string())?;
        let audiences = accepted_audiences(&claims.aud, wanted)?;
        claims.check_time(now)?;
        let k = &claims.kubernetes;
        let ns = k.namespace.as_str();
        let account = self.service_account(ns, &k.serviceaccount.name)?;
        if deleted_before_leeway(&account, now) {
            return Err(format!(
                "service account {ns}/{} has been deleted",
                k.serviceaccount.name
            ));
        }
        if uid(&account) != k.serviceaccount.uid {
            return Err(format!(
                "service account UID ({}) does not match claim ({})",
                uid(&account),
                k.serviceaccount.uid
            ));
        }
        let invalidated = || "service account token has been invalidated".to_string();
        if let Some(secret) = &k.secret {
            let found = self
                .core_object("secrets", ns, &secret.name)
                .ok_or_else(invalidated)?;
            if deleted_before_leeway(&found, now) {
                return Err(invalidated());
            }
            if uid(&found) != secret.uid {
                return Err(format!(
                    "secret UID ({}) does not match service account secret ref claim ({})",
                    uid(&found),
                    secret.uid
                ));
            }
        }
        let mut user = service_account_user(ns, &k.serviceaccount);
        if let Some(pod) = &k.pod {
            let found = self
                .core_object("pods", ns, &pod.name)
                .ok_or_else(invalidated)?;
            if deleted_before_leeway(&found, now) {
                return Err(invalidated());
            }
            if uid(&found) != pod.uid {
                return Err(format!(
                    "pod UID ({}) does not match service account pod ref claim ({})",
                    uid(&found),
                    pod.uid
                ));
            }
            if !pod.name.is_empty() && !pod.uid.is_empty() {
                user.extra
                    .insert(satoken::POD_NAME_KEY.into(), vec![pod.name.clone()]);
                user.extra
                    .insert(satoken::POD_UID_KEY.into(), vec![pod.uid.clone()]);
            }
        }
        Ok(Authenticated { user, audiences })
    }

    fn verify_legacy(
        &self,
        claims: Result<LegacyClaims, satoken::VerifyError>,
        token: &str,
        wanted: &[String],
    ) -> Result<Authenticated, String> {
        let claims = claims.map_err(|e| e.to_string())?;
        // A legacy token names no audience: it is taken to be for the API server's.
        let audiences = accepted_audiences(&[], wanted)?;
        claims.check()?;
        let ns = claims.namespace.as_str();
        let invalidated = || "Token has been invalidated".to_string();
        let secret = self
            .core_object("secrets", ns, &claims.secret_name)
            .ok_or_else(invalidated)?;
        if object::path(&secret, "metadata.deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Err(invalidated());
        }
        let held = object::path(&secret, "data.token")
            .and_then(Value::as_str)
            .and_then(|b| {
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).ok()
            });
        if held.as_deref() != Some(token.as_bytes()) {
            return Err("Token does not match server's copy".into());
        }
        let account = self.service_account(ns, &claims.service_account_name)?;
        if object::path(&account, "metadata.deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Err(format!(
                "ServiceAccount {ns}/{} has been deleted",
                claims.service_account_name
            ));
        }
        if uid(&account) != claims.service_account_uid {
            return Err(format!(
                "ServiceAccount UID ({}) does not match claim ({})",
                uid(&account),
                claims.service_account_uid
            ));
        }
        let user = service_account_user(
            ns,
            &ObjectRef::new(&claims.service_account_name, &claims.service_account_uid),
        );
        Ok(Authenticated { user, audiences })
    }

    /// A core/v1 object from the cache.
    fn core_object(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let def = self.registry().owner("", plural)?;
        self.cache
            .get(&def, Some(namespace), name)
            .map(|e| e.value())
    }

    /// The ServiceAccount, or the lookup's error (upstream passes the client's NotFound on).
    fn service_account(&self, namespace: &str, name: &str) -> Result<Value, String> {
        let def = self
            .registry()
            .owner("", "serviceaccounts")
            .ok_or_else(|| "no serviceaccounts resource".to_string())?;
        self.cache
            .get(&def, Some(namespace), name)
            .map(|e| e.value())
            .ok_or_else(|| ApiError::not_found(&def, name).message)
    }

    /// `POST .../serviceaccounts/NAME/token`: a TokenRequest answered with a signed token.
    pub(crate) async fn request_token(
        &self,
        t: &Target,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let namespace = t
            .namespace
            .as_deref()
            .ok_or_else(|| ApiError::bad_request("namespace is required"))?;
        let mut req = request::decode_object(body, request::body_type(headers)?.1)?;
        let kind = token_request_kind();
        let given_name = object::name(&req).to_string();
        if !given_name.is_empty() && given_name != name {
            return Err(ApiError::invalid(
                &kind,
                name,
                &[FieldError::invalid(
                    "metadata.name",
                    json!(given_name),
                    "must match the service account name if specified",
                )],
            ));
        }
        let given_ns = object::namespace(&req).unwrap_or("").to_string();
        if !given_ns.is_empty() && given_ns != namespace {
            return Err(ApiError::invalid(
                &kind,
                name,
                &[FieldError::invalid(
                    "metadata.namespace",
                    json!(given_ns),
                    "must match the service account namespace if specified",
                )],
            ));
        }
        self.sync_cache().await?;
        let sa_def = self.storage_of(&t.def);
        // Upstream admits a TokenRequest as a CREATE of `serviceaccounts/token`: NodeRestriction
        // lets a node mint tokens only bound to its own pods.
        let user = crate::context::user()?;
        let review = Review {
            user: &user,
            operation: Operation::Create,
            kind: &sa_def,
            view: &t.def,
            namespace: Some(namespace),
            name,
            subresource: Some("token"),
            old: None,
            dry_run: false,
            reserved: Default::default(),
            mutated: Default::default(),
        };
        self.admit(&review, &mut req, crate::admission::Pass::VALIDATED)
            .await?;
        let key = self.service_account_key.clone().ok_or_else(|| {
            ApiError::internal("failed to generate token: no service account signing key")
        })?;
        let account = self
            .cache
            .get(&sa_def, Some(namespace), name)
            .ok_or_else(|| ApiError::not_found(&sa_def, name))?
            .value();
        let spec = req.get("spec").cloned().unwrap_or(Value::Null);
        let mut audiences: Vec<String> = match spec.get("audiences") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| ApiError::bad_request(format!("spec.audiences: {e}")))?,
        };
        if audiences.is_empty() {
            audiences = api_audiences();
        }
        let expiration = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
            Some(v) => v.as_i64().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "spec.expirationSeconds: expected an integer, got {v}"
                ))
            })?,
        };
        let mut errors = Vec::new();
        if expiration < 600 {
            errors.push(FieldError::invalid(
                "spec.expirationSeconds",
                json!(expiration),
                "may not specify a duration less than 10 minutes",
            ));
        }
        if expiration > 1 << 32 {
            errors.push(FieldError::invalid(
                "spec.expirationSeconds",
                json!(expiration),
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(&kind, "", &errors));
        }
        let bound_ref = spec.get("boundObjectRef").filter(|r| !r.is_null());
        let binding = match bound_ref {
            Some(r) => Some(self.bound_object(namespace, name, r)?),
            None => None,
        };
        let bound_to_pod = matches!(binding, Some(Binding::Pod(_)));
        let mut lifetime = expiration;
        let mut warn_after = 0;
        let api = api_audiences();
        if bound_to_pod
            && expiration == WARN_ONLY_EXPIRATION_SECONDS
            && audiences.iter().all(|a| api.contains(a))
        {
            warn_after = expiration;
            lifetime = EXTENDED_EXPIRATION_SECONDS;
        }
        let now = clock::now();
        let claims = BoundClaims::new(
            ISSUER,
            namespace,
            ObjectRef::new(name, uid(&account)),
            binding,
            audiences.clone(),
            now.as_second(),
            lifetime,
            warn_after,
        );
        let token = key
            .sign(&claims)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let expires = jiff::Timestamp::from_second(now.as_second() + expiration)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let creation = jiff::Timestamp::from_second(now.as_second())
            .map_err(|e| ApiError::internal(e.to_string()))?;
        req["apiVersion"] = json!("authentication.k8s.io/v1");
        req["kind"] = json!("TokenRequest");
        if !req.get("metadata").is_some_and(Value::is_object) {
            req["metadata"] = json!({});
        }
        req["metadata"]["name"] = json!(name);
        req["metadata"]["namespace"] = json!(namespace);
        req["metadata"]["creationTimestamp"] = json!(creation.to_string());
        let mut spec_out = json!({"audiences": audiences, "expirationSeconds": expiration});
        if let Some(r) = bound_ref {
            spec_out["boundObjectRef"] = r.clone();
        }
        req["spec"] = spec_out;
        req["status"] = json!({"token": token, "expirationTimestamp": expires.to_string()});
        Ok(json_response(StatusCode::CREATED, req.to_string()))
    }

    /// The object a TokenRequest binds its token to, checked as upstream does.
    fn bound_object(&self, namespace: &str, account: &str, r: &Value) -> ApiResult<Binding> {
        let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (api_version, kind, name, want_uid) = (
            field("apiVersion"),
            field("kind"),
            field("name"),
            field("uid"),
        );
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        let plural = match (group.as_str(), kind.as_str()) {
            ("", "Pod") => "pods",
            ("", "Secret") => "secrets",
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={kind}"
                )));
            }
        };
        let def = self
            .registry()
            .owner("", plural)
            .ok_or_else(|| ApiError::internal(format!("no {plural} resource")))?;
        let entry = self
            .cache
            .get(&def, Some(namespace), &name)
            .ok_or_else(|| ApiError::not_found(&def, &name))?;
        let obj = self.cache.parsed(&def.key(Some(namespace), &name), &entry);
        if plural == "pods"
            && object::path(&obj, "spec.serviceAccountName").and_then(Value::as_str)
                != Some(account)
        {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount \"{account}\" to pod running with different serviceaccount name."
            )));
        }
        let found_uid = uid(&obj).to_string();
        if !want_uid.is_empty() && want_uid != found_uid {
            return Err(ApiError {
                code: 409,
                reason: "Conflict",
                message: format!(
                    "Operation cannot be fulfilled on {kind} \"{name}\": the UID in the bound object reference ({want_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
                details: Some(json!({"name": name, "kind": kind})),
            });
        }
        let r = ObjectRef::new(name, found_uid);
        Ok(if plural == "pods" {
            Binding::Pod(r)
        } else {
            Binding::Secret(r)
        })
    }
}

/// The kind TokenRequest's errors name.
fn token_request_kind() -> crate::registry::Kind {
    crate::registry::Kind::new(
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        "tokenrequests",
        true,
    )
}

/// The audiences a token (`token_audiences`, empty for a legacy token: the API server's own)
/// is accepted for among `wanted`; none is an error (upstream's message).
fn accepted_audiences(
    token_audiences: &[String],
    wanted: &[String],
) -> Result<Vec<String>, String> {
    let api;
    let token_audiences = if token_audiences.is_empty() {
        api = api_audiences();
        &api
    } else {
        token_audiences
    };
    let both: Vec<String> = token_audiences
        .iter()
        .filter(|a| wanted.contains(a))
        .cloned()
        .collect();
    if both.is_empty() {
        return Err(format!(
            "token audiences {} is invalid for the target audiences {}",
            go_quoted_list(token_audiences),
            go_quoted_list(wanted)
        ));
    }
    Ok(both)
}

/// Upstream's `ServiceAccountInfo.UserInfo` without the pod extras.
fn service_account_user(namespace: &str, account: &ObjectRef) -> UserInfo {
    UserInfo {
        username: satoken::username(namespace, &account.name),
        uid: account.uid.clone(),
        groups: satoken::groups(namespace),
        extra: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_intersect_as_upstream() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            accepted_audiences(&s(&["a", "b"]), &s(&["b", "c"])),
            Ok(s(&["b"]))
        );
        assert_eq!(
            accepted_audiences(&[], &api_audiences()),
            Ok(api_audiences())
        );
        assert_eq!(
            accepted_audiences(&s(&["a", "b"]), &s(&["c"])),
            Err(r#"token audiences ["a" "b"] is invalid for the target audiences ["c"]"#.into())
        );
    }
}
