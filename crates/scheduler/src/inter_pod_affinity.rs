//! Inter-pod affinity and anti-affinity, as upstream's `InterPodAffinity` plugin: the incoming
//! pod's required terms, the required anti-affinity of pods already placed (symmetry: an existing
//! pod that refuses the incoming one keeps it out of its topology domain), and the preferred terms
//! of both sides for scoring.
//!
//! Like upstream's PreFilter, [`AffinityState::new`] counts once per attempt, per topology pair
//! (`topologyKey`, value), the existing pods each term matches; filtering a node is then a few map
//! lookups. The counts are updated as pods are taken away or put back, which is how preemption
//! asks "would it fit without these victims?".

use crate::{cache::Cache, node_info::NodeInfo, pod_affinity::AffinityTerm, pod_info::PodInfo};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `InterPodAffinity`'s reason when a required affinity term has no match in the node's domain.
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// `InterPodAffinity`'s reason when the pod's anti-affinity term matches a pod in the domain.
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// `InterPodAffinity`'s reason when an existing pod's anti-affinity refuses the incoming pod.
pub const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// Upstream's `hardPodAffinityWeight` default: how much an existing pod's *required* affinity to
/// the incoming pod counts when scoring.
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// Whether `term` selects `pod`, the pod's namespace labels read from `cache` only when the
/// term's `namespaceSelector` has to decide.
fn selects(term: &AffinityTerm, pod: &PodInfo, cache: &Cache) -> bool {
    term.matches(&pod.namespace, &pod.labels, || {
        cache.namespace_labels(&pod.namespace)
    })
}

/// A topology domain: a label key and one of its values.
pub type TopologyPair = (String, String);

/// Upstream's `preFilterState` of `InterPodAffinity` for one incoming pod.
#[derive(Clone, Debug, Default)]
pub struct AffinityState {
    /// Domains holding an existing pod whose required anti-affinity refuses the incoming pod.
    existing_anti: HashMap<TopologyPair, i64>,
    /// Per domain, existing pods that match every required affinity term of the incoming pod.
    affinity: HashMap<TopologyPair, i64>,
    /// Per domain, existing pods that match one of the incoming pod's anti-affinity terms.
    anti: HashMap<TopologyPair, i64>,
    /// Whether the incoming pod has nothing for this plugin to check (the common case).
    inert: bool,
}

impl AffinityState {
    /// Counts, for `pod`, the existing pods its terms select and the existing pods whose
    /// required anti-affinity selects it.
    pub fn new(pod: &PodInfo, cache: &Cache) -> Self {
        let mut state = Self::default();
        for (existing, node) in cache.pods_with_terms_for(&pod.labels) {
            state.count_existing_anti(pod, existing, &node.labels, cache, 1);
        }
        let terms = &pod.affinity;
        if !terms.required.is_empty() || !terms.required_anti.is_empty() {
            let mut seen = BTreeSet::new();
            for term in terms.required.iter().chain(&terms.required_anti) {
                for (existing, node) in cache.candidates(term.selector.as_ref()) {
                    if seen.insert(existing.uid.as_str()) {
                        state.count_incoming(pod, existing, &node.labels, cache, 1);
                    }
                }
            }
        }
        state.inert = state.existing_anti.is_empty()
            && terms.required.is_empty()
            && terms.required_anti.is_empty();
        state
    }

    fn count_existing_anti(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &BTreeMap<String, String>,
        cache: &Cache,
        delta: i64,
    ) {
        for term in &existing.affinity.required_anti {
            if let Some(value) = node.get(&term.topology_key)
                && selects(term, pod, cache)
            {
                bump(
                    &mut self.existing_anti,
                    (term.topology_key.clone(), value.clone()),
                    delta,
                );
            }
        }
    }

    fn count_incoming(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &BTreeMap<String, String>,
        cache: &Cache,
        delta: i64,
    ) {
        let terms = &pod.affinity;
        if !terms.required.is_empty() && terms.required.iter().all(|t| selects(t, existing, cache))
        {
            for t in &terms.required {
                if let Some(value) = node.get(&t.topology_key) {
                    bump(
                        &mut self.affinity,
                        (t.topology_key.clone(), value.clone()),
                        delta,
                    );
                }
            }
        }
        for t in &terms.required_anti {
            if let Some(value) = node.get(&t.topology_key)
                && selects(t, existing, cache)
            {
                bump(
                    &mut self.anti,
                    (t.topology_key.clone(), value.clone()),
                    delta,
                );
            }
        }
    }

    /// Takes `existing` (on a node with `node_labels`) out of the counts (`delta` -1) or puts it
    /// back (+1), as upstream's `AddPod`/`RemovePod` during preemption.
    pub fn update(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node_labels: &BTreeMap<String, String>,
        cache: &Cache,
        delta: i64,
    ) {
        if existing.uid == pod.uid {
            return;
        }
        self.count_existing_anti(pod, existing, node_labels, cache, delta);
        self.count_incoming(pod, existing, node_labels, cache, delta);
    }

    /// Upstream's `Filter`: the pod's affinity first, then its anti-affinity, then existing
    /// pods' anti-affinity. `Err((reason, resolvable))`: only affinity is unresolvable, since
    /// removing pods can never create a match.
    pub fn filter(
        &self,
        pod: &PodInfo,
        node_labels: &BTreeMap<String, String>,
        cache: &Cache,
    ) -> Result<(), (&'static str, bool)> {
        if self.inert {
            return Ok(());
        }
        let has = |map: &HashMap<TopologyPair, i64>, key: &str| {
            node_labels.get(key).is_some_and(|v| {
                map.get(&(key.to_string(), v.clone()))
                    .is_some_and(|&n| n > 0)
            })
        };
        let terms = &pod.affinity.required;
        if !terms.is_empty() {
            let keys = terms
                .iter()
                .all(|t| node_labels.contains_key(&t.topology_key));
            let satisfied = terms.iter().all(|t| has(&self.affinity, &t.topology_key));
            // The first pod of a group with affinity to itself: no pod matches yet, and the
            // pod matches its own terms, so it may go anywhere that has the topology keys.
            let first = self.affinity.values().all(|&n| n <= 0)
                && terms.iter().all(|t| selects(t, pod, cache));
            if !keys || !(satisfied || first) {
                return Err((REASON_AFFINITY, false));
            }
        }
        if pod
            .affinity
            .required_anti
            .iter()
            .any(|t| has(&self.anti, &t.topology_key))
        {
            return Err((REASON_ANTI_AFFINITY, true));
        }
        if self
            .existing_anti
            .iter()
            .any(|((k, v), &n)| n > 0 && node_labels.get(k) == Some(v))
        {
            return Err((REASON_EXISTING_ANTI_AFFINITY, true));
        }
        Ok(())
    }
}

fn bump(map: &mut HashMap<TopologyPair, i64>, pair: TopologyPair, delta: i64) {
    let n = map.entry(pair).or_insert(0);
    *n += delta;
}

/// Upstream's `InterPodAffinity` score, before normalizing: per topology pair, the weights of
/// the incoming pod's preferred terms that existing pods match (anti-affinity negative), and of
/// existing pods' affinity terms that match the incoming pod. `None` when nothing applies.
pub fn topology_scores(pod: &PodInfo, cache: &Cache) -> Option<HashMap<TopologyPair, i64>> {
    let mut scores: HashMap<TopologyPair, i64> = HashMap::new();
    let mut add = |key: &str, node: &NodeInfo, weight: i64| {
        if let Some(value) = node.labels.get(key) {
            *scores.entry((key.to_string(), value.clone())).or_insert(0) += weight;
        }
    };
    for (sign, terms) in [
        (1, &pod.affinity.preferred),
        (-1, &pod.affinity.preferred_anti),
    ] {
        for t in terms {
            for (existing, node) in cache.candidates(t.selector.as_ref()) {
                if existing.uid != pod.uid && selects(t, existing, cache) {
                    add(&t.topology_key, node, sign * t.weight);
                }
            }
        }
    }
    for (existing, node) in cache.pods_with_terms_for(&pod.labels) {
        if existing.uid == pod.uid {
            continue;
        }
        let a = &existing.affinity;
        for (sign, weight, terms) in [
            (1, Some(HARD_POD_AFFINITY_WEIGHT), &a.required),
            (1, None, &a.preferred),
            (-1, None, &a.preferred_anti),
        ] {
            for t in terms.iter().filter(|t| selects(t, pod, cache)) {
                add(&t.topology_key, node, sign * weight.unwrap_or(t.weight));
            }
        }
    }
    (!scores.is_empty()).then_some(scores)
}

/// One node's raw score from [`topology_scores`].
pub fn node_score(
    scores: &HashMap<TopologyPair, i64>,
    node_labels: &BTreeMap<String, String>,
) -> i64 {
    scores
        .iter()
        .filter(|((k, v), _)| node_labels.get(k) == Some(v))
        .map(|(_, s)| s)
        .sum()
}

/// Upstream's `NormalizeScore`: scaled to 0..=100 between the lowest and highest raw score; all
/// equal scores 0.
pub fn normalize(raw: &[i64]) -> Vec<i64> {
    let (Some(&min), Some(&max)) = (raw.iter().min(), raw.iter().max()) else {
        return Vec::new();
    };
    raw.iter()
        .map(|&s| {
            if max > min {
                crate::score::MAX_NODE_SCORE * (s - min) / (max - min)
            } else {
                0
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;
    use crate::{
        algorithm::{Decision, schedule},
        testing::{cache, node, pod},
    };
    use serde_json::{Value, json};

    const HOST: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn anti(labels: Value, key: &str) -> Value {
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}})
    }

    fn affinity(labels: Value, key: &str) -> Value {
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}})
    }

    /// What each node says to `pod` (`None`: it fits).
    fn verdicts(pod: &PodInfo, cache: &Cache) -> Vec<Option<&'static str>> {
        let state = AffinityState::new(pod, cache);
        cache
            .nodes()
            .iter()
            .map(|n| state.filter(pod, &n.info.labels, cache).err().map(|e| e.0))
            .collect()
    }

    #[test]
    fn required_anti_affinity_keeps_pods_apart() {
        let zk0 = pod("zk-0", json!({"app": "zk"}), 100, json!({}));
        let other = pod("web", json!({"app": "web"}), 100, json!({}));
        let c = cache(
            vec![node("a", "z1"), node("b", "z1"), node("c", "z2")],
            &[(&zk0, "a"), (&other, "b")],
        );
        let zk1 = pod(
            "zk-1",
            json!({"app": "zk"}),
            100,
            anti(json!({"app": "zk"}), HOST),
        );
        assert_eq!(verdicts(&zk1, &c), [Some(REASON_ANTI_AFFINITY), None, None]);
        let by_zone = pod(
            "zk-2",
            json!({"app": "zk"}),
            100,
            anti(json!({"app": "zk"}), ZONE),
        );
        assert_eq!(
            verdicts(&by_zone, &c),
            [Some(REASON_ANTI_AFFINITY), Some(REASON_ANTI_AFFINITY), None],
            "the whole zone of a matching pod is refused"
        );
    }

    #[test]
    fn existing_pods_anti_affinity_refuses_the_incoming_pod() {
        let loner = pod(
            "loner",
            json!({"app": "db"}),
            100,
            anti(json!({"app": "web"}), ZONE),
        );
        let c = cache(
            vec![node("a", "z1"), node("b", "z1"), node("c", "z2")],
            &[(&loner, "a")],
        );
        let web = pod("web", json!({"app": "web"}), 100, json!({}));
        assert_eq!(
            verdicts(&web, &c),
            [
                Some(REASON_EXISTING_ANTI_AFFINITY),
                Some(REASON_EXISTING_ANTI_AFFINITY),
                None
            ]
        );
        let api = pod("api", json!({"app": "api"}), 100, json!({}));
        assert_eq!(verdicts(&api, &c), [None, None, None]);
    }

    #[test]
    fn required_affinity_follows_its_peers_and_lets_the_first_one_in() {
        let db = pod("db", json!({"app": "db"}), 100, json!({}));
        let c = cache(
            vec![node("a", "z1"), node("b", "z1"), node("c", "z2")],
            &[(&db, "a")],
        );
        let web = pod(
            "web",
            json!({"app": "web"}),
            100,
            affinity(json!({"app": "db"}), ZONE),
        );
        assert_eq!(verdicts(&web, &c), [None, None, Some(REASON_AFFINITY)]);
        let cache_rejects =
            AffinityState::new(&web, &c).filter(&web, &c.nodes()[2].info.labels, &c);
        assert_eq!(cache_rejects, Err((REASON_AFFINITY, false)), "unresolvable");
        // No pod matches yet: a pod with affinity to its own kind may start the group.
        let first = pod(
            "cache-0",
            json!({"app": "cache"}),
            100,
            affinity(json!({"app": "cache"}), ZONE),
        );
        assert_eq!(verdicts(&first, &c), [None, None, None]);
        let stranger = pod(
            "x",
            json!({"app": "x"}),
            100,
            affinity(json!({"app": "cache"}), ZONE),
        );
        assert_eq!(
            verdicts(&stranger, &c),
            [Some(REASON_AFFINITY); 3],
            "a pod not matching its own terms waits for a peer"
        );
    }

    #[test]
    fn namespaces_and_namespace_selectors() {
        let mut other = pod("db", json!({"app": "db"}), 100, json!({}));
        other.namespace = "prod".into();
        let mut c = cache(vec![node("a", "z1"), node("b", "z2")], &[(&other, "a")]);
        c.set_namespace("prod", [("env".to_string(), "prod".to_string())].into());
        let term = |extra: Value| {
            let mut t =
                json!({"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST});
            t.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            pod(
                "web",
                json!({}),
                100,
                json!({"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [t]}}}),
            )
        };
        let cases = [
            ("own namespace only", json!({}), [None, None]),
            (
                "named namespace",
                json!({"namespaces": ["prod"]}),
                [Some(REASON_ANTI_AFFINITY), None],
            ),
            (
                "selector",
                json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}}),
                [Some(REASON_ANTI_AFFINITY), None],
            ),
            (
                "empty selector: all namespaces",
                json!({"namespaceSelector": {}}),
                [Some(REASON_ANTI_AFFINITY), None],
            ),
            (
                "selector matching nothing",
                json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}}),
                [None, None],
            ),
        ];
        for (name, extra, want) in cases {
            assert_eq!(verdicts(&term(extra), &c), want, "{name}");
        }
    }

    #[test]
    fn match_label_keys_narrow_the_selector_to_the_pods_own_values() {
        let old = pod("old", json!({"app": "web", "rev": "1"}), 100, json!({}));
        let c = cache(vec![node("a", "z1"), node("b", "z2")], &[(&old, "a")]);
        let spec = |keys: &str| {
            json!({"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST,
                keys: ["rev"]}]}}})
        };
        let new = pod(
            "new",
            json!({"app": "web", "rev": "2"}),
            100,
            spec("matchLabelKeys"),
        );
        assert_eq!(
            verdicts(&new, &c),
            [None, None],
            "only pods of its own revision"
        );
        let new = pod(
            "new",
            json!({"app": "web", "rev": "2"}),
            100,
            spec("mismatchLabelKeys"),
        );
        assert_eq!(
            verdicts(&new, &c),
            [Some(REASON_ANTI_AFFINITY), None],
            "only other revisions"
        );
    }

    #[test]
    fn one_replica_more_than_nodes_gets_upstreams_message() {
        let zk = |i: usize| {
            pod(
                &format!("zk-{i}"),
                json!({"app": "zk"}),
                100,
                anti(json!({"app": "zk"}), HOST),
            )
        };
        let pods: Vec<PodInfo> = (0..3).map(zk).collect();
        let c = cache(
            vec![node("a", "z1"), node("b", "z2"), node("c", "z3")],
            &[(&pods[0], "a"), (&pods[1], "b"), (&pods[2], "c")],
        );
        assert_eq!(
            schedule(&zk(3), &c, &mut 0, None, Vec::new),
            Decision::Unschedulable("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..".into())
        );
    }

    #[test]
    fn preferred_terms_steer_the_score() {
        let db = pod("db", json!({"app": "db"}), 100, json!({}));
        let c = cache(
            vec![node("a", "z1"), node("b", "z2"), node("c", "z3")],
            &[(&db, "b")],
        );
        let near = pod(
            "near",
            json!({}),
            100,
            json!({"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}}]}}}),
        );
        assert_eq!(
            schedule(&near, &c, &mut 0, None, Vec::new),
            Decision::Bind("b".into())
        );
        let scores = topology_scores(&near, &c).unwrap();
        let raw: Vec<i64> = c
            .nodes()
            .iter()
            .map(|n| node_score(&scores, &n.info.labels))
            .collect();
        assert_eq!(normalize(&raw), [0, 100, 0]);
        let far = pod(
            "far",
            json!({}),
            100,
            json!({"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}}]}}}),
        );
        assert_ne!(
            schedule(&far, &c, &mut 0, None, Vec::new),
            Decision::Bind("b".into())
        );
    }
}
