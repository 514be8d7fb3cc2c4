//! The three kinds that roll out (Deployment, DaemonSet, StatefulSet) and how the command line
//! names one of them: `deploy/web`, `daemonset web`, `statefulsets.apps/db`.

use anyhow::bail;
use kube::api::ApiResource;
use std::fmt;

/// A kind with rollouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// apps/v1 Deployment: revisions are ReplicaSets.
    Deployment,
    /// apps/v1 DaemonSet: revisions are ControllerRevisions.
    DaemonSet,
    /// apps/v1 StatefulSet: revisions are ControllerRevisions.
    StatefulSet,
}

impl Kind {
    /// Reads kubectl's names for the kind: plural, singular, short name or kind, optionally
    /// qualified by `.apps` or `.v1.apps`.
    pub fn parse(s: &str) -> anyhow::Result<Kind> {
        let lower = s.to_lowercase();
        let base = lower
            .strip_suffix(".v1.apps")
            .or_else(|| lower.strip_suffix(".apps"))
            .unwrap_or(&lower);
        Ok(match base {
            "deployment" | "deployments" | "deploy" => Kind::Deployment,
            "daemonset" | "daemonsets" | "ds" => Kind::DaemonSet,
            "statefulset" | "statefulsets" | "sts" => Kind::StatefulSet,
            _ => bail!(
                "unknown kind {s:?}: rollouts are of deployments (deploy), daemonsets (ds) and \
                 statefulsets (sts), e.g. deploy/web"
            ),
        })
    }

    /// The kind as the API names it.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::DaemonSet => "DaemonSet",
            Kind::StatefulSet => "StatefulSet",
        }
    }

    /// The plural resource.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::DaemonSet => "daemonsets",
            Kind::StatefulSet => "statefulsets",
        }
    }

    /// The short name (`deploy`, `ds`, `sts`).
    pub fn short(self) -> &'static str {
        match self {
            Kind::Deployment => "deploy",
            Kind::DaemonSet => "ds",
            Kind::StatefulSet => "sts",
        }
    }

    /// How kubectl's messages start: `deployment`, `daemon set`, `statefulset`.
    pub fn spoken(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment",
            Kind::DaemonSet => "daemon set",
            Kind::StatefulSet => "statefulset",
        }
    }

    /// The client's description of the resource.
    pub fn api_resource(self) -> ApiResource {
        ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: self.kind().into(),
            plural: self.plural().into(),
        }
    }
}

/// One workload named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadRef {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
}

impl WorkloadRef {
    /// Reads `KIND/NAME`, or `KIND NAME` given as two arguments.
    pub fn parse(args: &[String]) -> anyhow::Result<WorkloadRef> {
        let (kind, name) = match args {
            [one] => match one.split_once('/') {
                Some((k, n)) => (k, n),
                None => {
                    bail!("{one:?} names no object: write KIND/NAME, e.g. deploy/{one} or ds/{one}")
                }
            },
            [k, n] => (k.as_str(), n.as_str()),
            [] => bail!("name a workload: KIND/NAME, e.g. deploy/web"),
            _ => bail!("name one workload: KIND/NAME, e.g. deploy/web"),
        };
        if name.is_empty() {
            bail!("{kind}/ names no object: write KIND/NAME, e.g. {kind}/web");
        }
        Ok(WorkloadRef {
            kind: Kind::parse(kind)?,
            name: name.to_string(),
        })
    }

    /// A later `rollwright` command's argument for it: `ds/agent`.
    pub fn short(&self) -> String {
        format!("{}/{}", self.kind.short(), self.name)
    }
}

impl fmt::Display for WorkloadRef {
    /// kubectl's `deployment.apps/web`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.apps/{}", self.kind.kind().to_lowercase(), self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubectl_names_of_the_three_kinds() {
        for (s, want) in [
            ("deploy", Kind::Deployment),
            ("Deployment", Kind::Deployment),
            ("deployments.apps", Kind::Deployment),
            ("deployment.v1.apps", Kind::Deployment),
            ("ds", Kind::DaemonSet),
            ("daemonsets", Kind::DaemonSet),
            ("sts", Kind::StatefulSet),
            ("StatefulSet", Kind::StatefulSet),
        ] {
            assert_eq!(Kind::parse(s).expect(s), want, "{s}");
        }
        let err = Kind::parse("rs").unwrap_err().to_string();
        assert!(err.contains("unknown kind \"rs\""), "{err}");
    }

    #[test]
    fn refs_with_slash_or_two_words() {
        let r = WorkloadRef::parse(&args(&["ds/agent"])).expect("ref");
        assert_eq!((r.kind, r.name.as_str()), (Kind::DaemonSet, "agent"));
        assert_eq!(r.to_string(), "daemonset.apps/agent");
        assert_eq!(r.short(), "ds/agent");
        let r = WorkloadRef::parse(&args(&["deployment", "web"])).expect("ref");
        assert_eq!(r.to_string(), "deployment.apps/web");
        assert!(WorkloadRef::parse(&args(&["web"])).is_err());
        assert!(WorkloadRef::parse(&args(&["deploy/"])).is_err());
        assert!(WorkloadRef::parse(&args(&[])).is_err());
    }
}
