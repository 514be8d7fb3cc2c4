//! The `User-Agent` rollwright's components send. The API server names a write's field manager
//! after the agent's product (the part before the first `/`) when the request names none, as
//! upstream does, so the components call themselves what upstream's do: `kube-controller-manager`,
//! `kube-scheduler`, `kubelet`. `kubectl get -o yaml --show-managed-fields` then reads as on a real
//! cluster, and tools that single out those managers (GitOps diff filters) treat them alike.

use http::HeaderValue;

/// A part of the control plane, as it introduces itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// The controllers (`rollwright controllers`, or in `up`).
    ControllerManager,
    /// The scheduler.
    Scheduler,
    /// A simulated node's kubelet.
    Kubelet,
}

impl Component {
    /// The product name upstream's component sends.
    pub fn product(self) -> &'static str {
        match self {
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
            Component::Kubelet => "kubelet",
        }
    }

    /// The component an in-process identity belongs to: nodes are kubelets, the scheduler is
    /// itself, and the controller manager reads as `system:kube-controller-manager` and writes
    /// as its controllers' ServiceAccounts in `kube-system`.
    pub fn of_user(user: &str) -> Option<Self> {
        if user.starts_with("system:node:") {
            Some(Component::Kubelet)
        } else if user == "system:kube-scheduler" {
            Some(Component::Scheduler)
        } else if user == "system:kube-controller-manager"
            || user.starts_with("system:serviceaccount:kube-system:")
        {
            Some(Component::ControllerManager)
        } else {
            None
        }
    }

    /// `kube-scheduler/v1.32.4 (linux/x86_64) rollwright/0.1.0`: upstream's shape, with
    /// rollwright's own version where upstream names its commit.
    pub fn user_agent(self) -> HeaderValue {
        let agent = format!(
            "{}/{} ({}/{}) rollwright/{}",
            self.product(),
            apiserver::discovery::GIT_VERSION,
            std::env::consts::OS,
            std::env::consts::ARCH,
            env!("CARGO_PKG_VERSION"),
        );
        // Every part is ASCII without control characters, so this cannot fail; an empty agent
        // (upstream's answer for a client that sends none) is the fallback all the same.
        HeaderValue::from_str(&agent).unwrap_or(HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_map_to_upstreams_component_names() {
        let table = [
            ("system:node:node-3", Some("kubelet")),
            ("system:kube-scheduler", Some("kube-scheduler")),
            (
                "system:kube-controller-manager",
                Some("kube-controller-manager"),
            ),
            (
                "system:serviceaccount:kube-system:job-controller",
                Some("kube-controller-manager"),
            ),
            ("system:serviceaccount:default:default", None),
            ("rollwright-admin", None),
        ];
        for (user, want) in table {
            assert_eq!(
                Component::of_user(user).map(Component::product),
                want,
                "{user}"
            );
        }
        let agent = Component::Kubelet.user_agent();
        let agent = agent.to_str().unwrap();
        assert!(agent.starts_with("kubelet/v1."), "{agent}");
        assert_eq!(agent.split('/').next(), Some("kubelet"));
    }
}
