//! The audit policy: which requests are recorded and how much of each, as upstream's
//! `audit.k8s.io/v1` Policy read from `--audit-policy-file` (`pkg/audit/policy/reader.go`),
//! validated as `pkg/apis/audit/validation` does and evaluated as `pkg/audit/policy/checker.go`
//! does: the first rule that matches a request decides its level; none matching means `None`.

use api::field::{FieldError, Path as FieldPath};
use authz::Attributes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// How much of a request is recorded, in upstream's order: each level records what the one
/// before it does and more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who asked for what, and the answer's status; no bodies.
    Metadata,
    /// Metadata and the request's body.
    Request,
    /// Metadata and both bodies.
    RequestResponse,
}

impl Level {
    const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }
}

/// The points in a request's life at which an event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// When a long-running request (a watch) sends its headers.
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When handling the request panicked.
    Panic,
}

impl Stage {
    const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    fn name(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.name() == s)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of stages (upstream keeps a slice and unions them through a map).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    /// Whether `stage` is in the set.
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

impl FromIterator<Stage> for Stages {
    fn from_iter<I: IntoIterator<Item = Stage>>(iter: I) -> Self {
        Stages(iter.into_iter().fold(0, |bits, s| bits | s.bit()))
    }
}

/// What the policy decides for one request (upstream's `RequestAuditConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// How much is recorded.
    pub level: Level,
    /// Stages at which nothing is written.
    pub omit_stages: Stages,
    /// Whether `metadata.managedFields` is left out of recorded bodies.
    pub omit_managed_fields: bool,
}

/// Why a policy could not be loaded; the messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("failed to read file path {path:?}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Something was wrong with what the file holds.
    #[error("{source}: from file {}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        source: Box<PolicyError>,
    },
    /// Neither YAML nor JSON of the right shape.
    #[error("failed decoding: {0}")]
    Decode(String),
    /// Not an `audit.k8s.io/v1` Policy.
    #[error("unknown group version field {0} in policy")]
    GroupVersion(String),
    /// Rules that do not validate, as upstream's aggregated field errors print them.
    #[error("{0}")]
    Invalid(String),
    /// A policy without rules would record nothing; upstream refuses it.
    #[error("loaded illegal policy with 0 rules")]
    NoRules,
}

/// A loaded, valid audit policy.
#[derive(Clone, Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

#[derive(Clone, Debug, Default)]
struct Rule {
    level: Option<Level>,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    /// The rule's own stages united with the policy's, as upstream's evaluator stores them.
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

/// The file's form, before validation.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyDoc {
    api_version: Option<String>,
    kind: Option<String>,
    rules: Option<Vec<RuleDoc>>,
    omit_stages: Option<Vec<String>>,
    omit_managed_fields: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleDoc {
    level: Option<String>,
    users: Option<Vec<String>>,
    user_groups: Option<Vec<String>>,
    verbs: Option<Vec<String>>,
    resources: Option<Vec<GroupResources>>,
    namespaces: Option<Vec<String>>,
    #[serde(rename = "nonResourceURLs")]
    non_resource_urls: Option<Vec<String>>,
    omit_stages: Option<Vec<String>>,
    omit_managed_fields: Option<bool>,
}

const API_VERSION: &str = "audit.k8s.io/v1";

impl Policy {
    /// Reads and validates the policy in `path` (YAML or JSON).
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let bytes = std::fs::read(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&bytes).map_err(|e| PolicyError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Parses and validates a policy (YAML or JSON).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PolicyError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| PolicyError::Decode(format!("the file is not UTF-8: {e}")))?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_saphyr::from_str(text).map_err(|e| PolicyError::Decode(e.to_string()))?
        };
        // Upstream decodes strictly first and, on unknown fields only, falls back to a lenient
        // decode with a warning; serde's default is the lenient one, so we look for the unknown
        // fields ourselves to give the same warning.
        let unknown = unknown_fields(&value);
        if !unknown.is_empty() {
            tracing::warn!(
                "Audit policy contains errors, falling back to lenient decoding: strict decoding error: {}",
                unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let doc: PolicyDoc = if value.is_null() {
            PolicyDoc::default()
        } else {
            serde_json::from_value(value).map_err(|e| PolicyError::Decode(e.to_string()))?
        };
        let api_version = doc.api_version.clone().unwrap_or_default();
        let kind = doc.kind.clone().unwrap_or_default();
        if api_version != API_VERSION {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
            return Err(PolicyError::GroupVersion(format!(
                "{group}/{version}, Kind={kind}"
            )));
        }
        let policy = validate(doc)?;
        if policy.rules.is_empty() {
            return Err(PolicyError::NoRules);
        }
        Ok(policy)
    }

    /// The level and stages for a request: the first matching rule's, else `None`.
    pub(crate) fn evaluate(&self, attrs: &Attributes) -> RequestAuditConfig {
        match self.rules.iter().find(|r| r.matches(attrs)) {
            Some(rule) => RequestAuditConfig {
                level: rule.level.unwrap_or(Level::None),
                omit_stages: rule.omit_stages,
                // A rule's own setting overrides the policy's.
                omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
            },
            None => RequestAuditConfig {
                level: Level::None,
                omit_stages: self.omit_stages,
                omit_managed_fields: self.omit_managed_fields,
            },
        }
    }
}

/// Upstream's `ValidatePolicy`, then the typed policy with each rule's stages united with the
/// policy's (`NewPolicyRuleEvaluator`).
fn validate(doc: PolicyDoc) -> Result<Policy, PolicyError> {
    let mut errors: Vec<FieldError> = Vec::new();
    let omit_stages = stages(
        doc.omit_stages.as_deref().unwrap_or_default(),
        &FieldPath::new("omitStages"),
        &mut errors,
    );
    let rules_path = FieldPath::new("rules");
    let mut rules = Vec::new();
    for (i, r) in doc.rules.unwrap_or_default().into_iter().enumerate() {
        let path = rules_path.index(i);
        let level = match r.level.as_deref() {
            None | Some("") => {
                errors.push(FieldError::required(path.child("level").as_str(), ""));
                None
            }
            Some(l) => {
                let parsed = Level::parse(l);
                if parsed.is_none() {
                    errors.push(FieldError::not_supported(
                        path.child("level").as_str(),
                        Value::String(l.to_string()),
                        &Level::NAMES,
                    ));
                }
                parsed
            }
        };
        let non_resource_urls = r.non_resource_urls.unwrap_or_default();
        let urls_path = path.child("nonResourceURLs");
        for (j, url) in non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            if !url.starts_with('/') {
                errors.push(FieldError::invalid(
                    urls_path.index(j).as_str(),
                    Value::String(url.clone()),
                    "non-resource URL rules must begin with a '/' character",
                ));
            }
            if url.len() > 1 && url[..url.len() - 1].contains('*') {
                errors.push(FieldError::invalid(
                    urls_path.index(j).as_str(),
                    Value::String(url.clone()),
                    "non-resource URL wildcards '*' must be the final character of the rule",
                ));
            }
        }
        let resources = r.resources.unwrap_or_default();
        let resources_path = path.child("resources");
        for gr in &resources {
            if !gr.group.is_empty() {
                let msgs = api::validation::dns1123_subdomain(&gr.group);
                if !msgs.is_empty() {
                    errors.push(FieldError::invalid(
                        resources_path.child("group").as_str(),
                        Value::String(gr.group.clone()),
                        msgs.join(","),
                    ));
                }
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errors.push(invalid_list(
                    &resources_path.child("resourceNames"),
                    &gr.resource_names,
                    "using resourceNames requires at least one resource",
                ));
            }
        }
        let rule_stages = stages(
            r.omit_stages.as_deref().unwrap_or_default(),
            &path.child("omitStages"),
            &mut errors,
        );
        let namespaces = r.namespaces.unwrap_or_default();
        if !non_resource_urls.is_empty() && (!resources.is_empty() || !namespaces.is_empty()) {
            errors.push(invalid_list(
                &urls_path,
                &non_resource_urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        rules.push(Rule {
            level,
            users: r.users.unwrap_or_default(),
            user_groups: r.user_groups.unwrap_or_default(),
            verbs: r.verbs.unwrap_or_default(),
            resources,
            namespaces,
            non_resource_urls,
            omit_stages: rule_stages.union(omit_stages),
            omit_managed_fields: r.omit_managed_fields,
        });
    }
    if !errors.is_empty() {
        return Err(PolicyError::Invalid(aggregate(&errors)));
    }
    Ok(Policy {
        rules,
        omit_stages,
        omit_managed_fields: doc.omit_managed_fields.unwrap_or(false),
    })
}

fn stages(names: &[String], path: &FieldPath, errors: &mut Vec<FieldError>) -> Stages {
    let mut found = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match Stage::parse(name) {
            Some(s) => found.push(s),
            None => errors.push(FieldError::invalid(
                path.index(i).as_str(),
                Value::String(name.clone()),
                format!(
                    "allowed stages are {}",
                    Stage::ALL.map(Stage::name).join(",")
                ),
            )),
        }
    }
    found.into_iter().collect()
}

/// An `Invalid` error over a list, whose value upstream prints with Go's `%#v`.
fn invalid_list(path: &FieldPath, items: &[String], detail: &str) -> FieldError {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| Value::String(s.clone()).to_string())
        .collect();
    FieldError {
        kind: api::field::ErrorType::Invalid,
        field: path.as_str().to_string(),
        value: None,
        detail: format!("[]string{{{}}}: {detail}", quoted.join(", ")),
    }
}

/// Upstream's `utilerrors.NewAggregate(...).Error()`: one message alone, several in brackets,
/// duplicates once.
fn aggregate(errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let msg = e.to_string();
        if !seen.contains(&msg) {
            seen.push(msg);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The fields of a policy document that an `audit.k8s.io/v1` Policy does not have, as strict
/// decoding names them (`rules[0].resources[0].verbs`).
fn unknown_fields(doc: &Value) -> Vec<String> {
    const POLICY: &[&str] = &[
        "apiVersion",
        "kind",
        "metadata",
        "rules",
        "omitStages",
        "omitManagedFields",
    ];
    const RULE: &[&str] = &[
        "level",
        "users",
        "userGroups",
        "verbs",
        "resources",
        "namespaces",
        "nonResourceURLs",
        "omitStages",
        "omitManagedFields",
    ];
    const GROUP_RESOURCES: &[&str] = &["group", "resources", "resourceNames"];
    fn extra(v: &Value, known: &[&str], prefix: &str, out: &mut Vec<String>) {
        if let Some(map) = v.as_object() {
            for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                out.push(format!("{prefix}{key}"));
            }
        }
    }
    let mut out = Vec::new();
    extra(doc, POLICY, "", &mut out);
    let rules = doc.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        extra(rule, RULE, &format!("rules[{i}]."), &mut out);
        let resources = rule.get("resources").and_then(Value::as_array);
        for (j, gr) in resources.into_iter().flatten().enumerate() {
            extra(
                gr,
                GROUP_RESOURCES,
                &format!("rules[{i}].resources[{j}]."),
                &mut out,
            );
        }
    }
    out
}

impl Rule {
    /// Upstream's `ruleMatches`.
    fn matches(&self, attrs: &Attributes) -> bool {
        let user = &attrs.user;
        if !self.users.is_empty() && !self.users.contains(&user.username) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| self.user_groups.contains(g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return !attrs.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(&attrs.path, spec));
        }
        true
    }

    /// Upstream's `ruleMatchesResource`.
    fn matches_resource(&self, attrs: &Attributes) -> bool {
        if !attrs.resource_request {
            return false;
        }
        // Cluster-scoped requests have the empty namespace, which a rule can name.
        if !self.namespaces.is_empty() && !self.namespaces.contains(&attrs.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let resource = attrs.resource.as_str();
        let sub = attrs.subresource.as_str();
        let combined = if sub.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{sub}")
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == attrs.api_group)
            .any(|gr| {
                gr.resources.is_empty()
                    || (gr.resource_names.is_empty() || gr.resource_names.contains(&attrs.name))
                        && gr.resources.iter().any(|res| {
                            res == &combined
                                || res == "*"
                                || (!sub.is_empty() && res.strip_prefix("*/") == Some(sub))
                                || res.strip_suffix("/*") == Some(resource)
                        })
            })
    }
}

/// Upstream's `pathMatches`: `*`, the exact path, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|_| path.starts_with(spec.trim_end_matches('*')))
}

#[cfg(test)]
mod tests;
