//! Secret and ConfigMap volumes as the kubelet's volume manager mounts them
//! (`pkg/kubelet/volumemanager`, `pkg/volume/secret`, `pkg/volume/configmap`,
//! `pkg/volume/projected`): a pod's containers are not created until every volume is set up, and
//! a volume naming a Secret or ConfigMap that does not exist (and is not `optional: true`) fails
//! to set up. Each failed attempt is a `FailedMount` warning (`MountVolume.SetUp failed for volume
//! "x" : secret "y" not found`), retried with the operation executor's back-off (500ms doubling
//! to 2m2s); meanwhile the pod is `Pending`, its containers waiting in `ContainerCreating`.
//!
//! What exists is known from the simulator's watches of Secrets and ConfigMaps (their metadata
//! only): [`Objects`].

use k8s_openapi::api::core::v1::Pod;
use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

/// The kind of object a volume needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

impl Kind {
    /// As the kubelet's object managers name it in `NotFound` errors (`secret "y" not found`).
    fn resource(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::ConfigMap => "configmap",
        }
    }
}

/// An object a volume cannot be set up without.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// The pod's volume.
    pub volume: String,
    /// Secret or ConfigMap.
    pub kind: Kind,
    /// Its name, in the pod's namespace.
    pub name: String,
}

/// The objects `pod`'s volumes need: `secret` and `configMap` volumes and the sources of
/// `projected` ones that are not `optional: true`.
pub fn needs(pod: &Pod) -> Vec<Need> {
    let mut out = Vec::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    for v in volumes.into_iter().flatten() {
        let mut need = |kind, name: Option<&String>, optional: Option<bool>| {
            if optional != Some(true)
                && let Some(name) = name.filter(|n| !n.is_empty())
            {
                out.push(Need {
                    volume: v.name.clone(),
                    kind,
                    name: name.clone(),
                });
            }
        };
        if let Some(s) = &v.secret {
            need(Kind::Secret, s.secret_name.as_ref(), s.optional);
        }
        if let Some(c) = &v.config_map {
            need(Kind::ConfigMap, Some(&c.name), c.optional);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &source.secret {
                need(Kind::Secret, Some(&s.name), s.optional);
            }
            if let Some(c) = &source.config_map {
                need(Kind::ConfigMap, Some(&c.name), c.optional);
            }
        }
    }
    out
}

/// The Secrets and ConfigMaps that exist, by namespace, as the watches report them.
#[derive(Debug, Default)]
pub struct Objects {
    secrets: HashMap<String, HashSet<String>>,
    config_maps: HashMap<String, HashSet<String>>,
    /// Kinds whose watch has listed everything once.
    listed: HashSet<Kind>,
    /// Kinds being listed again, with what was seen so far.
    relisting: HashMap<Kind, HashMap<String, HashSet<String>>>,
}

impl Objects {
    fn map(&mut self, kind: Kind) -> &mut HashMap<String, HashSet<String>> {
        match kind {
            Kind::Secret => &mut self.secrets,
            Kind::ConfigMap => &mut self.config_maps,
        }
    }

    /// Whether both watches have listed once: before, a missing object may just not be known
    /// yet, and no failure is reported.
    pub fn known(&self) -> bool {
        self.listed.len() == 2
    }

    /// Whether the object exists.
    pub fn has(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        let map = match kind {
            Kind::Secret => &self.secrets,
            Kind::ConfigMap => &self.config_maps,
        };
        map.get(namespace).is_some_and(|s| s.contains(name))
    }

    /// The object was created or changed.
    pub fn added(&mut self, kind: Kind, namespace: &str, name: &str) {
        if let Some(seen) = self.relisting.get_mut(&kind) {
            seen.entry(namespace.to_string())
                .or_default()
                .insert(name.to_string());
        }
        self.map(kind)
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string());
    }

    /// The object was deleted.
    pub fn removed(&mut self, kind: Kind, namespace: &str, name: &str) {
        let map = self.map(kind);
        if let Some(set) = map.get_mut(namespace) {
            set.remove(name);
            if set.is_empty() {
                map.remove(namespace);
            }
        }
    }

    /// The watch of `kind` lists everything again.
    pub fn relist(&mut self, kind: Kind) {
        self.relisting.insert(kind, HashMap::new());
    }

    /// The list is complete: what it did not contain is gone.
    pub fn listed(&mut self, kind: Kind) {
        if let Some(seen) = self.relisting.remove(&kind) {
            *self.map(kind) = seen;
        }
        self.listed.insert(kind);
    }

    /// The volumes of `needs` that cannot be set up now, each with its `FailedMount` message.
    pub fn failures(&self, namespace: &str, needs: &[Need]) -> Vec<String> {
        let mut out: Vec<(&str, Vec<String>)> = Vec::new();
        for n in needs
            .iter()
            .filter(|n| !self.has(n.kind, namespace, &n.name))
        {
            let error = format!("{} \"{}\" not found", n.kind.resource(), n.name);
            match out.iter_mut().find(|(v, _)| *v == n.volume) {
                Some((_, errors)) if !errors.contains(&error) => errors.push(error),
                Some(_) => {}
                None => out.push((&n.volume, vec![error])),
            }
        }
        out.into_iter()
            .map(|(volume, errors)| {
                // A projected volume reports its sources' errors as one aggregate, as upstream's
                // `utilerrors.NewAggregate` prints it.
                let error = match errors.as_slice() {
                    [one] => one.clone(),
                    many => format!("[{}]", many.join(", ")),
                };
                format!("MountVolume.SetUp failed for volume \"{volume}\" : {error}")
            })
            .collect()
    }
}

/// Upstream's retry of a failed volume operation after its `n`th failure (from 1): 500ms,
/// doubling, at most 2m2s.
pub fn retry_after(n: u32) -> Duration {
    const INITIAL: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(122);
    INITIAL
        .saturating_mul(
            1u32.checked_shl(n.saturating_sub(1).min(16))
                .unwrap_or(u32::MAX),
        )
        .min(MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes},
        }))
        .unwrap()
    }

    #[test]
    fn volumes_need_what_they_name_unless_optional() {
        let p = pod(serde_json::json!([
            {"name": "s", "secret": {"secretName": "creds"}},
            {"name": "o", "secret": {"secretName": "maybe", "optional": true}},
            {"name": "c", "configMap": {"name": "conf"}},
            {"name": "api", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt"}},
                {"secret": {"name": "extra", "optional": false}},
                {"configMap": {"name": "opt", "optional": true}},
            ]}},
            {"name": "e", "emptyDir": {}},
        ]));
        let got: Vec<(String, Kind, String)> = needs(&p)
            .into_iter()
            .map(|n| (n.volume, n.kind, n.name))
            .collect();
        let want = [
            ("s", Kind::Secret, "creds"),
            ("c", Kind::ConfigMap, "conf"),
            ("api", Kind::ConfigMap, "kube-root-ca.crt"),
            ("api", Kind::Secret, "extra"),
        ]
        .map(|(v, k, n)| (v.to_string(), k, n.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn failures_read_as_upstreams_failed_mount_events() {
        let p = pod(serde_json::json!([
            {"name": "s", "secret": {"secretName": "creds"}},
            {"name": "api", "projected": {"sources": [
                {"configMap": {"name": "kube-root-ca.crt"}},
                {"secret": {"name": "extra"}},
            ]}},
        ]));
        let needs = needs(&p);
        let mut o = Objects::default();
        assert!(!o.known());
        o.listed(Kind::Secret);
        o.listed(Kind::ConfigMap);
        assert!(o.known());
        assert_eq!(
            o.failures("ns", &needs),
            [
                "MountVolume.SetUp failed for volume \"s\" : secret \"creds\" not found",
                "MountVolume.SetUp failed for volume \"api\" : [configmap \"kube-root-ca.crt\" not found, secret \"extra\" not found]",
            ]
        );
        o.added(Kind::ConfigMap, "ns", "kube-root-ca.crt");
        o.added(Kind::Secret, "other", "creds");
        assert_eq!(
            o.failures("ns", &needs),
            [
                "MountVolume.SetUp failed for volume \"s\" : secret \"creds\" not found",
                "MountVolume.SetUp failed for volume \"api\" : secret \"extra\" not found",
            ]
        );
        o.added(Kind::Secret, "ns", "creds");
        o.added(Kind::Secret, "ns", "extra");
        assert!(o.failures("ns", &needs).is_empty());
        // A relist forgets what it no longer contains.
        o.relist(Kind::Secret);
        o.added(Kind::Secret, "ns", "creds");
        o.listed(Kind::Secret);
        assert!(o.has(Kind::Secret, "ns", "creds"));
        assert!(!o.has(Kind::Secret, "ns", "extra"));
        o.removed(Kind::Secret, "ns", "creds");
        assert!(!o.has(Kind::Secret, "ns", "creds"));
    }

    #[test]
    fn retries_back_off_as_the_operation_executor_does() {
        let ms: Vec<u128> = (1..=10).map(|n| retry_after(n).as_millis()).collect();
        assert_eq!(
            ms,
            [
                500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 122000, 122000
            ]
        );
    }
}
