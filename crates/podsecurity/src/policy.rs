//! A namespace's policy from its `pod-security.kubernetes.io/*` labels (upstream's
//! `api.PolicyToEvaluate`).

use crate::level::{Level, LevelVersion, ParseError, Version};
use serde_json::{Map, Value};
use std::fmt;

/// The label names.
pub mod labels {
    /// The level whose violations refuse pods.
    pub const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
    /// The version of the enforced level.
    pub const ENFORCE_VERSION: &str = "pod-security.kubernetes.io/enforce-version";
    /// The level whose violations are recorded in the audit log.
    pub const AUDIT: &str = "pod-security.kubernetes.io/audit";
    /// The version of the audited level.
    pub const AUDIT_VERSION: &str = "pod-security.kubernetes.io/audit-version";
    /// The level whose violations are returned as warnings.
    pub const WARN: &str = "pod-security.kubernetes.io/warn";
    /// The version of the warned level.
    pub const WARN_VERSION: &str = "pod-security.kubernetes.io/warn-version";
}

/// What a namespace enforces, audits and warns about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Violations refuse pods.
    pub enforce: LevelVersion,
    /// Violations are audited.
    pub audit: LevelVersion,
    /// Violations are returned as warnings.
    pub warn: LevelVersion,
}

/// A label whose value is neither a level nor a version, as upstream's `field.Invalid` on
/// `metadata.labels[<label>]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: Invalid value: {}: {reason}", self.field(), Value::String(self.value.clone()))]
pub struct LabelError {
    /// The label's name.
    pub label: &'static str,
    /// Its value.
    pub value: String,
    /// Why it is refused.
    pub reason: ParseError,
}

impl LabelError {
    /// The field path upstream names: `metadata.labels[<label>]`.
    pub fn field(&self) -> String {
        format!("metadata.labels[{}]", self.label)
    }
}

impl Policy {
    /// The policy the namespace `labels` ask for, starting from `self` as the defaults, and
    /// the labels that could not be read. A policy always comes back: an unreadable enforce
    /// level enforces `restricted`, an unreadable version is `latest`, and unreadable audit or
    /// warn levels fail open to `privileged`. When `enforce` is set to a level stricter than
    /// `warn` and `warn` is not set, warnings follow the enforced level (and its version, unless
    /// `warn-version` is set).
    pub fn with_labels(self, labels: Option<&Map<String, Value>>) -> (Policy, Vec<LabelError>) {
        let mut p = self;
        let mut errors = Vec::new();
        let Some(labels) = labels.filter(|l| !l.is_empty()) else {
            return (p, errors);
        };
        // Labels are strings; anything else reads as the empty string, which no parse accepts.
        let get = |key: &str| labels.get(key).map(|v| v.as_str().unwrap_or_default());
        let mut invalid = |label: &'static str, value: &str, reason: ParseError| {
            errors.push(LabelError {
                label,
                value: value.to_string(),
                reason,
            })
        };

        let mut has_enforce_level = false;
        if let Some(v) = get(labels::ENFORCE) {
            match v.parse() {
                Ok(level) => {
                    p.enforce.level = level;
                    has_enforce_level = true;
                }
                Err(e) => {
                    p.enforce.level = Level::Restricted;
                    invalid(labels::ENFORCE, v, e);
                }
            }
        }
        if let Some(v) = get(labels::ENFORCE_VERSION) {
            p.enforce.version = parse_version(v, labels::ENFORCE_VERSION, &mut invalid);
        }
        if let Some(v) = get(labels::AUDIT) {
            p.audit.level = parse_open_level(v, labels::AUDIT, &mut invalid);
        }
        if let Some(v) = get(labels::AUDIT_VERSION) {
            p.audit.version = parse_version(v, labels::AUDIT_VERSION, &mut invalid);
        }
        let has_warn_level = get(labels::WARN).is_some();
        if let Some(v) = get(labels::WARN) {
            p.warn.level = parse_open_level(v, labels::WARN, &mut invalid);
        }
        let has_warn_version = get(labels::WARN_VERSION).is_some();
        if let Some(v) = get(labels::WARN_VERSION) {
            p.warn.version = parse_version(v, labels::WARN_VERSION, &mut invalid);
        }

        if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
            p.warn.level = p.enforce.level;
            if !has_warn_version {
                p.warn.version = p.enforce.version;
            }
        }
        (p, errors)
    }

    /// Whether nothing is enforced, audited or warned about.
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "enforce={}, audit={}, warn={}",
            self.enforce, self.audit, self.warn
        )
    }
}

fn parse_version(
    value: &str,
    label: &'static str,
    invalid: &mut impl FnMut(&'static str, &str, ParseError),
) -> Version {
    value.parse().unwrap_or_else(|e| {
        invalid(label, value, e);
        Version::Latest
    })
}

/// Audit and warn fail open: an unreadable level is `privileged`.
fn parse_open_level(
    value: &str,
    label: &'static str,
    invalid: &mut impl FnMut(&'static str, &str, ParseError),
) -> Level {
    value.parse().unwrap_or_else(|e| {
        invalid(label, value, e);
        Level::Privileged
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion::new(level, version)
    }

    /// Upstream's `makeLabels`: the given `pod-security.kubernetes.io/` labels and one other.
    fn policy_of(kvs: &[(&str, &str)]) -> (Policy, Vec<LabelError>) {
        let mut labels = Map::new();
        labels.insert("other-label".into(), json!("foo-bar"));
        for (k, v) in kvs {
            labels.insert(format!("pod-security.kubernetes.io/{k}"), json!(v));
        }
        Policy::default().with_labels(Some(&labels))
    }

    #[test]
    fn reads_labels_as_upstream() {
        // Upstream's api/helpers_test.go TestPolicyToEvaluate.
        use Level::*;
        use Version::*;
        let p = lv(Privileged, Latest);
        /// Labels, the policy they ask for, and whether some are invalid.
        type Case<'a> = (&'a [(&'a str, &'a str)], Policy, bool);
        let cases: Vec<Case> = vec![
            (
                &[("enforce", "baseline")],
                Policy {
                    enforce: lv(Baseline, Latest),
                    warn: lv(Baseline, Latest),
                    audit: p,
                },
                false,
            ),
            (
                &[("warn", "restricted")],
                Policy {
                    enforce: p,
                    warn: lv(Restricted, Latest),
                    audit: p,
                },
                false,
            ),
            (
                &[("audit", "baseline")],
                Policy {
                    enforce: p,
                    warn: p,
                    audit: lv(Baseline, Latest),
                },
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "restricted")],
                Policy {
                    enforce: lv(Baseline, Latest),
                    warn: lv(Restricted, Latest),
                    audit: p,
                },
                false,
            ),
            (
                &[("enforce", "baseline"), ("enforce-version", "v1.22")],
                Policy {
                    enforce: lv(Baseline, Minor(22)),
                    warn: lv(Baseline, Minor(22)),
                    audit: p,
                },
                false,
            ),
            (
                &[
                    ("enforce", "baseline"),
                    ("enforce-version", "v1.22"),
                    ("warn-version", "latest"),
                ],
                Policy {
                    enforce: lv(Baseline, Minor(22)),
                    warn: lv(Baseline, Latest),
                    audit: p,
                },
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn-version", "v1.23")],
                Policy {
                    enforce: lv(Baseline, Latest),
                    warn: lv(Baseline, Minor(23)),
                    audit: p,
                },
                false,
            ),
            (
                &[
                    ("enforce", "baseline"),
                    ("enforce-version", "v1.20"),
                    ("warn", "restricted"),
                    ("warn-version", "v1.21"),
                    ("audit", "restricted"),
                    ("audit-version", "v1.22"),
                ],
                Policy {
                    enforce: lv(Baseline, Minor(20)),
                    warn: lv(Restricted, Minor(21)),
                    audit: lv(Restricted, Minor(22)),
                },
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "privileged")],
                Policy {
                    enforce: lv(Baseline, Latest),
                    warn: p,
                    audit: p,
                },
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "foo")],
                Policy {
                    enforce: lv(Baseline, Latest),
                    warn: p,
                    audit: p,
                },
                true,
            ),
            (
                &[("enforce", "foo")],
                Policy {
                    enforce: lv(Restricted, Latest),
                    warn: p,
                    audit: p,
                },
                true,
            ),
        ];
        for (labels, want, want_err) in cases {
            let (got, errs) = policy_of(labels);
            assert_eq!(got, want, "{labels:?}");
            assert_eq!(!errs.is_empty(), want_err, "{labels:?}");
        }
    }

    #[test]
    fn invalid_labels_read_as_upstreams_field_errors() {
        let (_, errs) = policy_of(&[("enforce", "foo"), ("warn-version", "v2")]);
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "foo": must be one of privileged, baseline, restricted"#,
                r#"metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "v2": must be "latest" or "v1.x""#,
            ]
        );
    }

    #[test]
    fn no_labels_keep_the_defaults() {
        let (got, errs) = Policy::default().with_labels(None);
        assert!(got.fully_privileged() && errs.is_empty());
        assert_eq!(
            got.to_string(),
            "enforce=privileged:latest, audit=privileged:latest, warn=privileged:latest"
        );
    }
}
