//! Pod Security admission, as upstream's `pod-security-admission/admission/admission.go` with its
//! default configuration (no exemptions; `privileged:latest` wherever a namespace has no
//! `pod-security.kubernetes.io/*` labels):
//! - pods are held to the namespace's `enforce` level (403 on a violation) and `warn` level
//!   (warnings), on create and on updates that change what the checks read;
//! - workloads with pod templates are only warned about, never refused;
//! - namespaces must carry readable labels, and tightening `enforce` warns about the existing
//!   pods that would not pass.
//!
//! The checks themselves live in the `podsecurity` crate. Audit annotations are not recorded.

use crate::{
    error::{ApiError, ApiResult},
    object,
    plugins::{Operation, Review},
    state::ApiServer,
};
use api::field::FieldError;
use podsecurity::{Level, LevelVersion, Policy, evaluate};
use serde_json::Value;
use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

/// At most this many existing pods are checked against a namespace's new enforce level
/// (upstream's `defaultNamespaceMaxPodsToCheck`).
const MAX_PODS_TO_CHECK: usize = 3000;

/// And for at most this long (upstream's `defaultNamespacePodCheckTimeout`).
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Pod subresources whose writes cannot change what the checks read.
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// Checks `obj` against its namespace's Pod Security levels: an `enforce` violation refuses the
/// write, `warn` returns warnings.
pub(crate) fn admit(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &Value,
) -> ApiResult<Vec<String>> {
    if !matches!(review.operation, Operation::Create | Operation::Update) {
        return Ok(Vec::new());
    }
    match (review.kind.group.as_str(), review.kind.plural.as_str()) {
        ("", "namespaces") => admit_namespace(server, review, obj),
        ("", "pods") => admit_pod(server, review, obj),
        (group, plural) => match template_path(group, plural) {
            Some(path) => Ok(warn_template(server, review, obj, path)),
            None => Ok(Vec::new()),
        },
    }
}

/// Where the pod template of a workload kind is (upstream's `DefaultPodSpecExtractor`).
fn template_path(group: &str, plural: &str) -> Option<&'static str> {
    match (group, plural) {
        ("", "podtemplates") => Some("/template"),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some("/spec/template"),
        ("batch", "cronjobs") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// The policy of namespace `ns` from its labels in the watch cache, with the labels that could
/// not be read; `None` when the namespace is not known.
fn namespace_policy(server: &ApiServer, ns: &str) -> Option<(Policy, bool)> {
    let def = server.registry().find("", "v1", "namespaces")?;
    let entry = server.cache.get(&def, None, ns)?;
    let (policy, errors) = policy_of(&entry.value());
    Some((policy, !errors.is_empty()))
}

/// The policy a namespace object's labels ask for, and its unreadable labels.
fn policy_of(namespace: &Value) -> (Policy, Vec<podsecurity::LabelError>) {
    Policy::default().with_labels(
        namespace
            .pointer("/metadata/labels")
            .and_then(Value::as_object),
    )
}

fn admit_pod(server: &ApiServer, review: &Review<'_>, pod: &Value) -> ApiResult<Vec<String>> {
    if review
        .subresource
        .is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s))
    {
        return Ok(Vec::new());
    }
    // Upstream looks the namespace up first; asking about the update first lets a pod's
    // metadata change (a finalizer removed) through even when its namespace is already gone.
    if let Some(old) = review.old
        && review.operation == Operation::Update
        && !significant_update(pod, old)
    {
        return Ok(Vec::new());
    }
    let ns = review.namespace.unwrap_or_default();
    let Some((policy, invalid_labels)) = namespace_policy(server, ns) else {
        return Err(ApiError::internal(format!(
            "failed to lookup namespace {}",
            Value::String(ns.to_string())
        )));
    };
    if !invalid_labels && policy.fully_privileged() {
        return Ok(Vec::new());
    }
    let (meta, spec) = (&pod["metadata"], &pod["spec"]);
    let enforced = evaluate(policy.enforce, meta, spec);
    if !enforced.allowed() {
        // Upstream names the pod as created: with its generated name, not its `generateName`.
        let name = Some(object::name(pod))
            .filter(|n| !n.is_empty())
            .unwrap_or(review.name);
        return Err(ApiError::forbidden_by_admission(
            review.kind,
            name,
            &format!(
                "violates PodSecurity {}: {}",
                quoted(policy.enforce),
                enforced.forbidden_detail()
            ),
        ));
    }
    let warned = if policy.warn == policy.enforce {
        enforced
    } else {
        evaluate(policy.warn, meta, spec)
    };
    Ok(warning(policy.warn, &warned).into_iter().collect())
}

/// Whether a pod update changes what the checks read, as upstream's `isSignificantPodUpdate`:
/// the pod's seccomp annotation, the number of (init) containers, a container's image or seccomp
/// annotation, an ephemeral container added or changed. Other fields of a running pod's spec
/// cannot change, so an update of anything else (labels, other annotations) is not evaluated.
fn significant_update(pod: &Value, old: &Value) -> bool {
    fn list<'a>(obj: &'a Value, key: &str) -> &'a [Value] {
        obj["spec"][key].as_array().map_or(&[], Vec::as_slice)
    }
    fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
        obj.pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
    }
    // Upstream's `isSignificantContainerUpdate`.
    let container_changed = |new: &Value, old_c: &Value| {
        let key = format!(
            "{SECCOMP_CONTAINER_PREFIX}{}",
            new["name"].as_str().unwrap_or_default()
        );
        new["image"] != old_c["image"] || annotation(pod, &key) != annotation(old, &key)
    };
    if annotation(pod, SECCOMP_POD) != annotation(old, SECCOMP_POD) {
        return true;
    }
    for key in ["containers", "initContainers"] {
        let (new, old) = (list(pod, key), list(old, key));
        if new.len() != old.len() || new.iter().zip(old).any(|(n, o)| container_changed(n, o)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| {
        old_ephemeral
            .iter()
            .find(|o| o["name"] == c["name"])
            .is_none_or(|o| container_changed(c, o))
    })
}

/// The deprecated seccomp annotations a pod may still carry (`corev1.SeccompPodAnnotationKey`,
/// `SeccompContainerAnnotationKeyPrefix`), which Pod Security reads.
const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Workloads are warned about, never refused (upstream's `ValidatePodController`).
fn warn_template(server: &ApiServer, review: &Review<'_>, obj: &Value, path: &str) -> Vec<String> {
    if review.subresource.is_some() {
        return Vec::new();
    }
    let Some((policy, invalid_labels)) =
        namespace_policy(server, review.namespace.unwrap_or_default())
    else {
        return Vec::new();
    };
    if !invalid_labels && policy.warn.level == Level::Privileged {
        return Vec::new();
    }
    // A ReplicationController's template is optional; the other kinds always have one.
    let template = match obj.pointer(path) {
        Some(t) if !t.is_null() => t,
        _ if review.kind.plural == "replicationcontrollers" => return Vec::new(),
        _ => &Value::Null,
    };
    let verdict = evaluate(policy.warn, &template["metadata"], &template["spec"]);
    warning(policy.warn, &verdict).into_iter().collect()
}

/// The warning of a failed `warn` evaluation.
fn warning(lv: LevelVersion, verdict: &podsecurity::Verdict) -> Option<String> {
    (!verdict.allowed()).then(|| {
        format!(
            "would violate PodSecurity {}: {}",
            quoted(lv),
            verdict.forbidden_detail()
        )
    })
}

/// `"restricted:latest"`, as Go's `%q`.
fn quoted(lv: LevelVersion) -> String {
    format!("\"{lv}\"")
}

/// Namespaces: readable labels, and warnings about existing pods when `enforce` tightens
/// (upstream's `ValidateNamespace`).
fn admit_namespace(server: &ApiServer, review: &Review<'_>, ns: &Value) -> ApiResult<Vec<String>> {
    if review.subresource.is_some() {
        return Ok(Vec::new());
    }
    let old = review.old.filter(|_| review.operation == Operation::Update);
    match namespace_change(ns, old) {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(enforce)) => Ok(evaluate_pods_in(server, object::name(ns), enforce)),
        Err(errors) => {
            let causes: Vec<FieldError> = errors
                .iter()
                .map(|e| {
                    FieldError::invalid(
                        e.field(),
                        Value::String(e.value.clone()),
                        e.reason.to_string(),
                    )
                })
                .collect();
            Err(ApiError::invalid(review.kind, object::name(ns), &causes))
        }
    }
}

/// What a namespace write means for Pod Security: its unreadable labels (refused), or the new
/// enforce level its existing pods are to be checked against, if the change calls for it.
fn namespace_change(
    ns: &Value,
    old: Option<&Value>,
) -> Result<Option<LevelVersion>, Vec<podsecurity::LabelError>> {
    let (policy, errors) = policy_of(ns);
    let Some(old) = old else {
        return if errors.is_empty() {
            Ok(None)
        } else {
            Err(errors)
        };
    };
    let (old_policy, old_errors) = policy_of(old);
    // Labels that were already unreadable may stay as they were.
    if !errors.is_empty() && (old_errors.is_empty() || errors != old_errors) {
        return Err(errors);
    }
    let (new, old) = (policy.enforce, old_policy.enforce);
    // Nothing to check when enforce is unchanged, privileged, or relaxed at the same version.
    let unchanged_or_looser = new == old
        || new.level == Level::Privileged
        || (new.version == old.version && new.level <= old.level);
    Ok((!unchanged_or_looser).then_some(new))
}

/// Upstream's `EvaluatePodsInNamespace`: the existing pods of `ns` judged by the new enforce
/// level, one pod of each controller first, at most [`MAX_PODS_TO_CHECK`] of them for at most
/// [`POD_CHECK_TIMEOUT`]; pods failing for the same reasons are summarised together.
fn evaluate_pods_in(server: &ApiServer, ns: &str, enforce: LevelVersion) -> Vec<String> {
    let Some(def) = server.registry().find("", "v1", "pods") else {
        return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
    };
    let deadline = Instant::now() + POD_CHECK_TIMEOUT;
    let pods: Vec<Value> = server
        .cache
        .list(&def, Some(ns))
        .0
        .iter()
        .map(|e| e.value())
        .collect();
    summarize_pods(ns, enforce, &pods, MAX_PODS_TO_CHECK, deadline)
}

/// The warnings about `pods` of `ns` at `enforce`, checking at most `max` of them until
/// `deadline`.
fn summarize_pods(
    ns: &str,
    enforce: LevelVersion,
    pods: &[Value],
    max: usize,
    deadline: Instant,
) -> Vec<String> {
    let pods = prioritize(pods);
    let total = pods.len();
    let mut checked = total.min(max);

    // Each distinct summary, in first-seen order, with its lexically first pod and a count.
    let mut summaries: Vec<String> = Vec::new();
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    for (i, pod) in pods.iter().take(checked).enumerate() {
        let verdict = evaluate(enforce, &pod["metadata"], &pod["spec"]);
        if !verdict.allowed() {
            let summary = verdict.forbidden_reason();
            let name = object::name(pod);
            match seen.get_mut(&summary) {
                Some((first, count)) => {
                    if name < first.as_str() {
                        *first = name.to_string();
                    }
                    *count += 1;
                }
                None => {
                    seen.insert(summary.clone(), (name.to_string(), 1));
                    summaries.push(summary);
                }
            }
        }
        if Instant::now() >= deadline {
            checked = i + 1;
            break;
        }
    }

    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !summaries.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level {}",
            Value::String(ns.to_string()),
            quoted(enforce)
        ));
    }
    let mut decorated: Vec<String> = summaries
        .into_iter()
        .map(|summary| {
            let (first, count) = &seen[&summary];
            match count {
                1 => format!("{first}: {summary}"),
                2 => format!("{first} (and 1 other pod): {summary}"),
                n => format!("{first} (and {} other pods): {summary}", n - 1),
            }
        })
        .collect();
    decorated.sort();
    warnings.extend(decorated);
    warnings
}

/// The pods in upstream's checking order: the first pod of each controller (and every pod with
/// none) in listing order, then the other replicas.
fn prioritize(pods: &[Value]) -> Vec<&Value> {
    let mut first = Vec::with_capacity(pods.len());
    let mut replicas = Vec::new();
    let mut controllers = HashSet::new();
    for pod in pods {
        let controller = pod["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["controller"].as_bool() == Some(true))
            .map(|r| r["uid"].as_str().unwrap_or_default());
        match controller {
            Some(uid) if !controllers.insert(uid) => replicas.push(pod),
            _ => first.push(pod),
        }
    }
    first.extend(replicas);
    first
}

/// Upstream's `PodSecurity` admission plugin.
pub(crate) struct PodSecurity;

#[async_trait::async_trait]
impl crate::plugins::Plugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn handles(&self, _review: &crate::plugins::Review<'_>) -> bool {
        // Pods and pod templates on create and update; `admit` looks at the kind itself.
        true
    }

    async fn validate(
        &self,
        server: &ApiServer,
        review: &crate::plugins::Review<'_>,
        obj: &Value,
    ) -> ApiResult<Vec<String>> {
        admit(server, review, obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seccomp_annotations_are_significant_and_other_metadata_is_not() {
        let old = json!({"metadata": {"annotations": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let mut relabelled = old.clone();
        relabelled["metadata"]["annotations"]["a"] = json!("2");
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        assert!(!significant_update(&relabelled, &old));
        let mut pod_seccomp = old.clone();
        pod_seccomp["metadata"]["annotations"][SECCOMP_POD] = json!("unconfined");
        assert!(significant_update(&pod_seccomp, &old));
        let mut container_seccomp = old.clone();
        container_seccomp["metadata"]["annotations"]["container.seccomp.security.alpha.kubernetes.io/c"] =
            json!("unconfined");
        assert!(significant_update(&container_seccomp, &old));
    }

    #[test]
    fn image_changes_and_new_ephemeral_containers_are_significant() {
        let pod = |image: &str, ephemeral: Value| {
            json!({"spec": {"containers": [{"name": "c", "image": image}],
                "ephemeralContainers": ephemeral}})
        };
        let old = pod("a", json!([{"name": "e", "image": "x"}]));
        assert!(!significant_update(&old, &old));
        assert!(significant_update(
            &pod("b", json!([{"name": "e", "image": "x"}])),
            &old
        ));
        assert!(significant_update(
            &pod(
                "a",
                json!([{"name": "e", "image": "x"}, {"name": "f", "image": "x"}])
            ),
            &old
        ));
        assert!(significant_update(
            &pod("a", json!([{"name": "e", "image": "y"}])),
            &old
        ));
        let more = json!({"spec": {"containers": [{"name": "c", "image": "a"}, {"name": "d"}]}});
        assert!(significant_update(&more, &old));
    }

    #[test]
    fn checks_one_pod_per_controller_first() {
        let pod = |name: &str, uid: Option<&str>| match uid {
            Some(uid) => json!({"metadata": {"name": name, "ownerReferences": [
                {"uid": "other", "controller": false}, {"uid": uid, "controller": true}]}}),
            None => json!({"metadata": {"name": name}}),
        };
        let pods = [
            pod("a1", Some("a")),
            pod("a2", Some("a")),
            pod("b1", Some("b")),
            pod("bare", None),
        ];
        let order: Vec<&str> = prioritize(&pods).into_iter().map(object::name).collect();
        assert_eq!(order, ["a1", "b1", "bare", "a2"]);
    }

    #[test]
    fn namespace_changes_as_upstream() {
        use podsecurity::Version;
        let ns = |labels: Value| json!({"metadata": {"name": "n", "labels": labels}});
        let enforce = |level: &str| ns(json!({"pod-security.kubernetes.io/enforce": level}));
        let invalid = ns(json!({"pod-security.kubernetes.io/enforce": "bogus"}));
        let lv = |level, version| Ok(Some(LevelVersion::new(level, version)));

        assert_eq!(namespace_change(&enforce("baseline"), None), Ok(None));
        assert_eq!(
            namespace_change(&invalid, None).map_err(|e| e.len()),
            Err(1)
        );
        // Unreadable labels may stay as they were, but not become unreadable or change.
        assert_eq!(namespace_change(&invalid, Some(&invalid)), Ok(None));
        assert!(namespace_change(&invalid, Some(&enforce("baseline"))).is_err());
        let other = ns(json!({"pod-security.kubernetes.io/enforce": "bogus2"}));
        assert!(namespace_change(&other, Some(&invalid)).is_err());

        let none = ns(json!({}));
        assert_eq!(
            namespace_change(&enforce("baseline"), Some(&none)),
            lv(Level::Baseline, Version::Latest)
        );
        assert_eq!(
            namespace_change(&enforce("restricted"), Some(&enforce("baseline"))),
            lv(Level::Restricted, Version::Latest)
        );
        assert_eq!(
            namespace_change(&enforce("baseline"), Some(&enforce("restricted"))),
            Ok(None)
        );
        assert_eq!(
            namespace_change(&enforce("privileged"), Some(&enforce("baseline"))),
            Ok(None)
        );
        assert_eq!(
            namespace_change(&enforce("baseline"), Some(&enforce("baseline"))),
            Ok(None)
        );
        // A version change is checked even at a looser level.
        let pinned = ns(json!({"pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "v1.24"}));
        assert_eq!(
            namespace_change(&enforce("baseline"), Some(&pinned)),
            lv(Level::Baseline, Version::Latest)
        );
    }

    #[test]
    fn summarizes_existing_pods_as_upstream() {
        // Upstream's admission_test.go "bound number of pods" and "prioritized pods" (less the
        // runtime-class exemptions, which the default configuration has none of), with
        // real violations standing in for its stubbed evaluation. Pods are summarised by their
        // reasons, so equal reasons group.
        use podsecurity::Version;
        let baseline = LevelVersion::new(Level::Baseline, Version::Latest);
        let pod = |name: &str, uid: Option<&str>, spec: Value| {
            let mut p = json!({"metadata": {"name": name}, "spec": spec});
            if let Some(uid) = uid {
                p["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true}]);
            }
            p
        };
        let net = || json!({"hostNetwork": true});
        let far = Instant::now() + Duration::from_secs(3600);

        let five: Vec<Value> = (1..=5)
            .map(|i| pod(&format!("pod{i}"), None, net()))
            .collect();
        assert_eq!(
            summarize_pods("test", baseline, &five, 4, far),
            [
                "new PodSecurity enforce level only checked against the first 4 of 5 existing pods",
                r#"existing pods in namespace "test" violate the new PodSecurity enforce level "baseline:latest""#,
                "pod1 (and 3 other pods): host namespaces",
            ]
        );

        let mut pods = Vec::new();
        let privileged =
            json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]});
        for (rs, spec) in [("1", json!({"hostPID": true})), ("2", privileged)] {
            for i in 1..=4 {
                pods.push(pod(
                    &format!("replicaset{rs}pod{i}"),
                    Some(rs),
                    spec.clone(),
                ));
            }
        }
        let sysctl = json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax"}]}});
        pods.push(pod("uniquepod1", None, sysctl));
        pods.push(pod(
            "uniquepod2",
            None,
            json!({"volumes": [{"name": "v", "hostPath": {}}]}),
        ));
        assert_eq!(
            summarize_pods("test", baseline, &pods, 4, far),
            [
                "new PodSecurity enforce level only checked against the first 4 of 10 existing pods",
                r#"existing pods in namespace "test" violate the new PodSecurity enforce level "baseline:latest""#,
                "replicaset1pod1: host namespaces",
                "replicaset2pod1: privileged",
                "uniquepod1: forbidden sysctls",
                "uniquepod2: hostPath volumes",
            ]
        );

        // A deadline already passed stops after the first pod.
        assert_eq!(
            summarize_pods("test", baseline, &five, 4, Instant::now())[0],
            "new PodSecurity enforce level only checked against the first 1 of 5 existing pods"
        );
        assert!(summarize_pods("test", baseline, &[], 4, far).is_empty());
    }

    #[test]
    fn finds_the_template_of_each_workload_kind() {
        assert_eq!(template_path("apps", "deployments"), Some("/spec/template"));
        assert_eq!(
            template_path("batch", "cronjobs"),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(template_path("", "podtemplates"), Some("/template"));
        assert_eq!(template_path("", "services"), None);
    }
}
