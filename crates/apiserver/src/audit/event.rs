//! The `audit.k8s.io/v1` Event, serialized field for field as upstream's JSON log backend writes
//! it (`pkg/apis/audit/v1/types.go`): Go's declaration order, its `omitempty`s, and timestamps
//! as `metav1.MicroTime` (RFC 3339 in UTC with six fractional digits).

use super::policy::{Level, Stage};
use authz::UserInfo;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One record of the audit log.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    kind: &'static str,
    api_version: &'static str,
    pub level: Level,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    #[serde(serialize_with = "go_user_info")]
    pub user: UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    pub request_received_timestamp: MicroTime,
    pub stage_timestamp: MicroTime,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// An event of `level` received at `received`, with everything else to be filled in.
    pub fn new(level: Level, audit_id: String, received: MicroTime) -> Self {
        Self {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: String::new(),
            verb: String::new(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: received,
            stage_timestamp: received,
            annotations: BTreeMap::new(),
        }
    }

    /// The event as one line of the log, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        // Serializing plain structs, strings and JSON values cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// `authentication.k8s.io/v1` UserInfo as Go writes it: every field `omitempty`, so a request
/// without a user (one that failed authentication) has `"user":{}`.
fn go_user_info<S: serde::Serializer>(u: &UserInfo, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct GoUserInfo<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        username: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        uid: &'a str,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        groups: &'a [String],
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        extra: &'a BTreeMap<String, Vec<String>>,
    }
    GoUserInfo {
        username: &u.username,
        uid: &u.uid,
        groups: &u.groups,
        extra: &u.extra,
    }
    .serialize(s)
}

/// What a resource request is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The `metav1.Status` of the response: its code always, and for a `Status` body (a failure,
/// or a delete's success) the bounded fields upstream copies from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct ResponseStatus {
    /// Go's `ListMeta` is a struct, which `omitempty` never leaves out.
    pub metadata: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

impl ResponseStatus {
    /// Only the code, as upstream records a response that is not a `Status`.
    pub fn code(code: u16) -> Self {
        Self {
            code,
            ..Default::default()
        }
    }

    /// The fields upstream's `LogResponseObject` copies from a `Status` body, empty ones left
    /// out as Go's `omitempty` does.
    pub fn from_status(status: &Value, code: u16) -> Self {
        let text = |key: &str| {
            status
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Self {
            metadata: Map::new(),
            status: text("status"),
            message: text("message"),
            reason: text("reason"),
            details: status.get("details").and_then(details),
            code,
        }
    }
}

/// `StatusDetails` as Go writes it: every field is `omitempty`, so zero values go.
fn details(v: &Value) -> Option<Value> {
    let zero = |v: &Value| match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    let map: Map<String, Value> = v
        .as_object()?
        .iter()
        .filter(|(_, v)| !zero(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!map.is_empty()).then_some(Value::Object(map))
}

/// `metav1.MicroTime`: an instant, written to the microsecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MicroTime(jiff::Timestamp);

impl MicroTime {
    /// Now.
    pub fn now() -> Self {
        Self(clock::now())
    }
}

impl Serialize for MicroTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Go's RFC3339Micro truncates to the microsecond; so does `%.6f`.
        s.collect_str(&self.0.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_in_upstreams_field_order_and_form() {
        let at = MicroTime("2023-11-08T10:11:12.345678912Z".parse().unwrap());
        let mut ev = Event::new(Level::Metadata, "a-b-c".into(), at);
        ev.stage = Stage::ResponseComplete;
        ev.request_uri = "/api/v1/namespaces/default/pods?limit=500".into();
        ev.verb = "list".into();
        ev.user = UserInfo::new("admin", &["system:masters"]);
        ev.source_ips = vec!["127.0.0.1".into()];
        ev.user_agent = "kubectl/v1.28.4".into();
        ev.object_ref = Some(ObjectReference {
            resource: "pods".into(),
            namespace: "default".into(),
            api_version: "v1".into(),
            ..Default::default()
        });
        ev.response_status = Some(ResponseStatus::code(200));
        ev.stage_timestamp = MicroTime("2023-11-08T10:11:12.5Z".parse().unwrap());
        ev.annotations
            .insert("authorization.k8s.io/decision".into(), "allow".into());
        let line = String::from_utf8(ev.to_line()).unwrap();
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a-b-c","#,
                r#""stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods?limit=500","#,
                r#""verb":"list","user":{"username":"admin","groups":["system:masters"]},"#,
                r#""sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.28.4","#,
                r#""objectRef":{"resource":"pods","namespace":"default","apiVersion":"v1"},"#,
                r#""responseStatus":{"metadata":{},"code":200},"#,
                r#""requestReceivedTimestamp":"2023-11-08T10:11:12.345678Z","#,
                r#""stageTimestamp":"2023-11-08T10:11:12.500000Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"allow"}}"#,
                "\n"
            )
        );
    }

    #[test]
    fn a_status_body_gives_its_bounded_fields() {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": "pods \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "group": "", "kind": "pods", "causes": []}, "code": 404
        });
        let got = serde_json::to_value(ResponseStatus::from_status(&status, 404)).unwrap();
        assert_eq!(
            got.to_string(),
            r#"{"metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}"#
        );
    }
}
