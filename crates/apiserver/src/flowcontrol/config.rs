//! The FlowSchemas and PriorityLevelConfigurations as the filter uses them, and the matching of
//! a request to its FlowSchema (upstream's `apf_controller.go` digest and `rule.go`).

use std::collections::BTreeMap;

use authz::Attributes;
use serde_json::Value;

use super::queueset::{LevelConfig, Queuing};

/// A FlowSchema's matching part.
#[derive(Clone, Debug)]
pub(crate) struct FlowSchema {
    pub name: String,
    pub uid: String,
    pub priority_level: String,
    pub matching_precedence: i64,
    pub distinguisher: Distinguisher,
    rules: Vec<Rule>,
}

/// How requests of one FlowSchema are told apart into flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Distinguisher {
    /// One flow.
    None,
    ByUser,
    ByNamespace,
}

#[derive(Clone, Debug)]
struct Rule {
    subjects: Vec<Subject>,
    resource_rules: Vec<ResourceRule>,
    non_resource_rules: Vec<NonResourceRule>,
}

#[derive(Clone, Debug)]
enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

#[derive(Clone, Debug)]
struct ResourceRule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    cluster_scope: bool,
    namespaces: Vec<String>,
}

#[derive(Clone, Debug)]
struct NonResourceRule {
    verbs: Vec<String>,
    urls: Vec<String>,
}

/// A PriorityLevelConfiguration's settings.
#[derive(Clone, Debug)]
pub(crate) struct PriorityLevel {
    pub name: String,
    pub uid: String,
    /// `None`: exempt.
    pub limited: Option<Limited>,
    /// An exempt level's `nominalConcurrencyShares` (counted in the sum the others' limits are
    /// shares of; 0 by default).
    exempt_shares: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Limited {
    pub nominal_shares: u32,
    pub queuing: Option<Queuing>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn int_at(v: &Value, path: &[&str]) -> Option<i64> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_i64)
}

impl FlowSchema {
    /// Reads a stored (v1beta3) FlowSchema.
    pub(crate) fn from_json(fs: &Value) -> Self {
        let spec = fs.get("spec").cloned().unwrap_or(Value::Null);
        let distinguisher = match str_at(&spec, &["distinguisherMethod", "type"]) {
            "ByUser" => Distinguisher::ByUser,
            "ByNamespace" => Distinguisher::ByNamespace,
            _ => Distinguisher::None,
        };
        let rules = spec
            .get("rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(Rule::from_json).collect())
            .unwrap_or_default();
        Self {
            name: str_at(fs, &["metadata", "name"]).to_string(),
            uid: str_at(fs, &["metadata", "uid"]).to_string(),
            priority_level: str_at(&spec, &["priorityLevelConfiguration", "name"]).to_string(),
            matching_precedence: int_at(&spec, &["matchingPrecedence"]).unwrap_or(1000),
            distinguisher,
            rules,
        }
    }

    /// Whether a request matches one of the schema's rules.
    pub(crate) fn matches(&self, attrs: &Attributes) -> bool {
        self.rules.iter().any(|r| r.matches(attrs))
    }

    /// The flow a request of this schema belongs to, within the schema.
    pub(crate) fn flow_distinguisher<'a>(&self, attrs: &'a Attributes) -> &'a str {
        match self.distinguisher {
            Distinguisher::None => "",
            Distinguisher::ByUser => &attrs.user.username,
            Distinguisher::ByNamespace => &attrs.namespace,
        }
    }
}

impl Rule {
    fn from_json(r: &Value) -> Self {
        let subjects = r
            .get("subjects")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Subject::from_json).collect())
            .unwrap_or_default();
        let resource_rules = r
            .get("resourceRules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .map(|rr| ResourceRule {
                        verbs: strings(rr.get("verbs")),
                        api_groups: strings(rr.get("apiGroups")),
                        resources: strings(rr.get("resources")),
                        cluster_scope: rr
                            .get("clusterScope")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        namespaces: strings(rr.get("namespaces")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let non_resource_rules = r
            .get("nonResourceRules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .map(|nr| NonResourceRule {
                        verbs: strings(nr.get("verbs")),
                        urls: strings(nr.get("nonResourceURLs")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            subjects,
            resource_rules,
            non_resource_rules,
        }
    }

    fn matches(&self, attrs: &Attributes) -> bool {
        if !self.subjects.iter().any(|s| s.matches(attrs)) {
            return false;
        }
        if attrs.resource_request {
            self.resource_rules.iter().any(|r| r.matches(attrs))
        } else {
            self.non_resource_rules.iter().any(|r| r.matches(attrs))
        }
    }
}

fn has(list: &[String], item: &str) -> bool {
    list.iter().any(|x| x == "*" || x == item)
}

impl Subject {
    fn from_json(s: &Value) -> Option<Self> {
        match s.get("kind").and_then(Value::as_str)? {
            "User" => Some(Subject::User(str_at(s, &["user", "name"]).to_string())),
            "Group" => Some(Subject::Group(str_at(s, &["group", "name"]).to_string())),
            "ServiceAccount" => Some(Subject::ServiceAccount {
                namespace: str_at(s, &["serviceAccount", "namespace"]).to_string(),
                name: str_at(s, &["serviceAccount", "name"]).to_string(),
            }),
            _ => None,
        }
    }

    fn matches(&self, attrs: &Attributes) -> bool {
        let user = &attrs.user;
        match self {
            Subject::User(name) => name == "*" || *name == user.username,
            Subject::Group(name) => name == "*" || user.groups.iter().any(|g| g == name),
            Subject::ServiceAccount { namespace, name } => {
                let Some(rest) = user.username.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                let Some((ns, sa)) = rest.split_once(':') else {
                    return false;
                };
                ns == namespace && (name == "*" || sa == name)
            }
        }
    }
}

impl ResourceRule {
    fn matches(&self, attrs: &Attributes) -> bool {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        has(&self.verbs, &attrs.verb)
            && has(&self.api_groups, &attrs.api_group)
            && has(&self.resources, &resource)
            && if attrs.namespace.is_empty() {
                self.cluster_scope
            } else {
                has(&self.namespaces, &attrs.namespace)
            }
    }
}

impl NonResourceRule {
    fn matches(&self, attrs: &Attributes) -> bool {
        has(&self.verbs, &attrs.verb)
            && self.urls.iter().any(|u| {
                u == "*"
                    || *u == attrs.path
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| attrs.path.starts_with(prefix))
            })
    }
}

impl PriorityLevel {
    /// Reads a stored (v1beta3) PriorityLevelConfiguration.
    pub(crate) fn from_json(pl: &Value) -> Self {
        let spec = pl.get("spec").cloned().unwrap_or(Value::Null);
        let limited = (str_at(&spec, &["type"]) != "Exempt").then(|| {
            let limited = spec.get("limited").cloned().unwrap_or(Value::Null);
            let response = limited.get("limitResponse").cloned().unwrap_or(Value::Null);
            let queuing = (str_at(&response, &["type"]) != "Reject").then(|| {
                let q = response.get("queuing").cloned().unwrap_or(Value::Null);
                Queuing {
                    queues: int_at(&q, &["queues"]).unwrap_or(64).max(1) as usize,
                    hand_size: int_at(&q, &["handSize"]).unwrap_or(8).max(1) as usize,
                    queue_length_limit: int_at(&q, &["queueLengthLimit"]).unwrap_or(50).max(1)
                        as usize,
                }
            });
            Limited {
                nominal_shares: int_at(&limited, &["nominalConcurrencyShares"])
                    .unwrap_or(30)
                    .max(0) as u32,
                queuing,
            }
        });
        Self {
            name: str_at(pl, &["metadata", "name"]).to_string(),
            uid: str_at(pl, &["metadata", "uid"]).to_string(),
            limited,
            exempt_shares: int_at(&spec, &["exempt", "nominalConcurrencyShares"])
                .unwrap_or(0)
                .max(0) as u32,
        }
    }

    /// The shares counted in the sum the limits are shares of.
    fn shares(&self) -> u32 {
        self.limited
            .as_ref()
            .map_or(self.exempt_shares, |l| l.nominal_shares)
    }
}

/// Every FlowSchema and PriorityLevelConfiguration, ready for matching.
#[derive(Clone, Debug, Default)]
pub(crate) struct Config {
    /// In matching order: by `matchingPrecedence`, then name; those naming a level that does
    /// not exist (dangling) are left out, as upstream leaves them.
    pub flow_schemas: Vec<FlowSchema>,
    pub levels: BTreeMap<String, PriorityLevel>,
}

impl Config {
    pub(crate) fn new(flow_schemas: &[Value], levels: &[Value]) -> Self {
        let levels: BTreeMap<String, PriorityLevel> = levels
            .iter()
            .map(PriorityLevel::from_json)
            .map(|l| (l.name.clone(), l))
            .collect();
        let mut flow_schemas: Vec<FlowSchema> = flow_schemas
            .iter()
            .map(FlowSchema::from_json)
            .filter(|fs| levels.contains_key(&fs.priority_level))
            .collect();
        flow_schemas.sort_by(|a, b| {
            a.matching_precedence
                .cmp(&b.matching_precedence)
                .then_with(|| a.name.cmp(&b.name))
        });
        Self {
            flow_schemas,
            levels,
        }
    }

    /// The first FlowSchema matching the request, and its level.
    pub(crate) fn classify(&self, attrs: &Attributes) -> Option<(&FlowSchema, &PriorityLevel)> {
        self.flow_schemas
            .iter()
            .find(|fs| fs.matches(attrs))
            .and_then(|fs| self.levels.get(&fs.priority_level).map(|pl| (fs, pl)))
    }

    /// Each limited level's settings: its nominal concurrency limit is its share of `total`
    /// seats, `ceil(total * shares / sum of shares)` (upstream's `NominalCL`).
    pub(crate) fn level_configs(
        &self,
        total: u32,
        wait_limit: std::time::Duration,
    ) -> BTreeMap<String, LevelConfig> {
        let sum: u64 = self
            .levels
            .values()
            .map(|l| u64::from(l.shares()))
            .sum::<u64>()
            .max(1);
        self.levels
            .values()
            .filter_map(|l| {
                let limited = l.limited.as_ref()?;
                let concurrency =
                    (u64::from(total) * u64::from(limited.nominal_shares)).div_ceil(sum) as u32;
                Some((
                    l.name.clone(),
                    LevelConfig {
                        concurrency: concurrency.max(1),
                        queuing: limited.queuing,
                        wait_limit,
                    },
                ))
            })
            .collect()
    }
}
