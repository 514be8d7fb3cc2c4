//! ControllerRevisions: the history of a workload's pod template, shared by the DaemonSet and
//! StatefulSet controllers (upstream's `pkg/controller/history` plus the DaemonSet controller's
//! `constructHistory`, `dedupCurHistories` and `cleanupHistory`).
//!
//! A revision named `<owner>-<hash>` records one template as the patch that restores it,
//! `{"spec":{"template":{"$patch":"replace",...}}}`, which is exactly what
//! `kubectl rollout undo` applies. The template is written as Go's `encoding/json` writes it
//! ([`go_json`]), byte for byte what upstream's controllers store, because upstream's clients
//! find the current revision by comparing `data` with the patch they marshal from the owner
//! (the e2e suite's `daemon.Match`, `kubectl rollout undo`). The revision whose template equals the owner's is *current*
//! and must carry the highest `revision` number: a rollback (the template reverting to an old
//! revision's) renumbers that revision `max + 1` instead of creating another, so the pods it
//! already runs keep their `controller-revision-hash` and are not restarted.
//!
//! The decisions (which revision is current, which duplicate to keep, which old ones to delete)
//! are pure functions; [`construct`] and friends do the API calls around them.

mod go_json;

use crate::util::api_error::is_status;
use api::pod::controller_ref;
use informer::{Cached, Shared};
use k8s_openapi::{
    api::apps::v1::ControllerRevision,
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, runtime::RawExtension},
};
use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use std::{
    collections::{BTreeMap, HashSet},
    fmt::Debug,
};

/// The label naming the revision a pod (or a revision itself) belongs to.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// Why the history could not be brought up to date (the owner is synced again later).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    /// A revision with the wanted name records another template: the owner's
    /// `status.collisionCount` was bumped, the next sync hashes differently.
    #[error("hash collision: ControllerRevision {0} already exists with another template")]
    Collision(String),
    /// The collision count this sync hashed with is no longer the owner's.
    #[error(
        "found a stale collision count ({seen:?}, expected {current:?}) of {owner}; will retry until it is updated"
    )]
    StaleCollisionCount {
        /// The owner.
        owner: String,
        /// The count this sync used.
        seen: Option<i32>,
        /// The count the server holds.
        current: Option<i32>,
    },
    /// The owner has no template to record.
    #[error("cannot serialize the template of {0}: {1}")]
    Template(String, serde_json::Error),
}

/// The `data` of a revision recording `template`: the template as Go writes it, with the
/// `$patch` directive first (where Go's sorted keys put it).
pub fn revision_data(template: &Value) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("$patch".into(), json!("replace"));
    if let Value::Object(fields) = go_json::pod_template(template) {
        data.extend(fields);
    }
    json!({"spec": {"template": Value::Object(data)}})
}

/// `template` (a pod template as JSON) in the form revisions record it, for comparing a
/// template with a revision's regardless of how either was written.
pub fn canonical_template(template: &Value) -> Value {
    go_json::pod_template(template)
}

/// The template a revision records (its data without the `$patch` directive).
pub fn revision_template(revision: &ControllerRevision) -> Option<Value> {
    let mut template = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Value::Object(map) = &mut template {
        map.remove("$patch");
    }
    Some(template)
}

/// Whether `revision` records `template`. Upstream compares the serialized patch; we compare
/// both templates in the form revisions record them, so a revision written before templates
/// were recorded that way (or by another writer) still matches its template.
pub fn matches(revision: &ControllerRevision, template: &Value) -> bool {
    revision_template(revision)
        .is_some_and(|t| canonical_template(&t) == canonical_template(template))
}

/// The hash label of a revision or pod.
pub fn hash_of(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH)
        .map(String::as_str)
}

/// The highest revision number among `revisions` (0 for none).
pub fn max_revision<'a>(
    revisions: impl IntoIterator<Item = &'a Shared<ControllerRevision>>,
) -> i64 {
    revisions.into_iter().map(|r| r.revision).max().unwrap_or(0)
}

/// Revisions split into those recording `template` (normally one) and the others.
pub fn split(
    revisions: Vec<Shared<ControllerRevision>>,
    template: &Value,
) -> (
    Vec<Shared<ControllerRevision>>,
    Vec<Shared<ControllerRevision>>,
) {
    revisions.into_iter().partition(|r| matches(r, template))
}

/// Which of several revisions recording the current template survives: the highest revision,
/// the last of equals (upstream's `dedupCurHistories`). Returns its index.
pub fn keep_of_duplicates(current: &[Shared<ControllerRevision>]) -> Option<usize> {
    let mut keep: Option<usize> = None;
    for (i, r) in current.iter().enumerate() {
        if keep.is_none_or(|k| r.revision >= current[k].revision) {
            keep = Some(i);
        }
    }
    keep
}

/// The old revisions to delete so that at most `limit` remain, oldest (lowest revision) first,
/// never one whose hash a live pod still carries (upstream's `cleanupHistory`).
pub fn to_truncate(
    old: &[Shared<ControllerRevision>],
    limit: i32,
    live_hashes: &HashSet<String>,
) -> Vec<Shared<ControllerRevision>> {
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    let mut to_kill = old.len().saturating_sub(limit);
    if to_kill == 0 {
        return Vec::new();
    }
    let mut sorted: Vec<&Shared<ControllerRevision>> = old.iter().collect();
    sorted.sort_by_key(|r| r.revision);
    let mut out = Vec::new();
    for r in sorted {
        if to_kill == 0 {
            break;
        }
        if hash_of(&r.metadata).is_some_and(|h| live_hashes.contains(h)) {
            continue;
        }
        out.push(Shared::clone(r));
        to_kill -= 1;
    }
    out
}

/// What a revision is cut from: the owner and its template.
#[derive(Clone, Debug)]
pub struct Owner<'a> {
    /// The owner's metadata (name, namespace, uid, annotations).
    pub meta: &'a ObjectMeta,
    /// `apps/v1`.
    pub api_version: &'a str,
    /// `DaemonSet` or `StatefulSet`.
    pub kind: &'a str,
    /// The owner's `spec.template` as JSON.
    pub template: &'a Value,
    /// The owner's `status.collisionCount`.
    pub collision_count: Option<i32>,
}

impl Owner<'_> {
    /// The hash of the template under the current collision count.
    pub fn hash(&self) -> String {
        api::hash::template_hash(self.template, self.collision_count)
    }
}

/// The revision recording the owner's template with number `revision`: named `<owner>-<hash>`,
/// labelled with the template's labels and the hash, annotated as the owner (so
/// `kubernetes.io/change-cause` shows in `kubectl rollout history`), controlled by the owner.
pub fn new_revision(owner: &Owner<'_>, revision: i64) -> ControllerRevision {
    let hash = owner.hash();
    let mut labels: BTreeMap<String, String> = owner
        .template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                owner.meta.name.as_deref().unwrap_or("")
            )),
            namespace: owner.meta.namespace.clone(),
            labels: Some(labels),
            annotations: owner.meta.annotations.clone(),
            owner_references: Some(vec![controller_ref(
                owner.api_version,
                owner.kind,
                owner.meta,
            )]),
            ..Default::default()
        },
        data: Some(RawExtension(revision_data(owner.template))),
        revision,
    }
}

/// The owner's history after [`construct`].
#[derive(Clone, Debug)]
pub struct Constructed {
    /// The revision recording the owner's template, with the highest revision number.
    pub current: Shared<ControllerRevision>,
    /// Every other revision.
    pub old: Vec<Shared<ControllerRevision>>,
    /// Other revisions recording the current template; the caller moves their pods onto
    /// `current`'s hash and then calls [`delete_duplicates`].
    pub duplicates: Vec<Shared<ControllerRevision>>,
}

impl Constructed {
    /// The hash new pods are labelled with.
    pub fn hash(&self) -> &str {
        hash_of(&self.current.metadata).unwrap_or("")
    }
}

/// Finds or creates the current revision among `revisions` (those the owner controls), renumbers
/// it `max + 1` if an old template became current again, and reports duplicates.
pub async fn construct(
    api: &Api<ControllerRevision>,
    owner: &Owner<'_>,
    revisions: Vec<Shared<ControllerRevision>>,
) -> Result<Constructed, Error> {
    let (mut current, old) = split(revisions, owner.template);
    let next = max_revision(&old) + 1;
    let Some(keep) = keep_of_duplicates(&current) else {
        let created = snapshot(api, owner, next).await?;
        return Ok(Constructed {
            current: created,
            old,
            duplicates: Vec::new(),
        });
    };
    let mut cur = current.swap_remove(keep);
    if cur.revision < next {
        let name = cur.metadata.name.clone().unwrap_or_default();
        let patch = json!({"revision": next});
        cur = Cached::shared(
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?,
        );
    }
    Ok(Constructed {
        current: cur,
        old,
        duplicates: current,
    })
}

/// Deletes revisions (duplicates, or those [`to_truncate`] chose); one already gone is fine.
pub async fn delete_revisions(
    api: &Api<ControllerRevision>,
    revisions: &[Shared<ControllerRevision>],
) -> Result<(), Error> {
    for r in revisions {
        let name = r.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Deletes the duplicates [`construct`] reported (once their pods carry the kept hash).
pub async fn delete_duplicates(
    api: &Api<ControllerRevision>,
    constructed: &Constructed,
) -> Result<(), Error> {
    delete_revisions(api, &constructed.duplicates).await
}

/// Creates the revision recording the owner's template. If the name is taken by a revision of
/// the same template (our own earlier creation, not yet in the cache) that one is returned; if
/// by another template, it is a hash collision: [`Error::Collision`], and the caller bumps the
/// owner's `status.collisionCount` with [`bump_collision_count`].
pub async fn snapshot(
    api: &Api<ControllerRevision>,
    owner: &Owner<'_>,
    revision: i64,
) -> Result<Shared<ControllerRevision>, Error> {
    let rev = new_revision(owner, revision);
    let name = rev.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &rev).await {
        Ok(created) => Ok(Cached::shared(created)),
        Err(e) if is_status(&e, 409) => {
            let existing = api.get(&name).await?;
            if matches(&existing, owner.template) {
                return Ok(Cached::shared(existing));
            }
            Err(Error::Collision(name))
        }
        Err(e) => Err(e.into()),
    }
}

/// Bumps `status.collisionCount` of the owner `name` by one, unless the count the colliding
/// sync used (`seen`) is stale, as upstream (so one collision bumps it once).
pub async fn bump_collision_count<K>(
    owners: &Api<K>,
    name: &str,
    seen: Option<i32>,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    // A plain Get, as upstream's: the roles grant `get` on the owner, not on its status.
    let current = owners.get(name).await?;
    let value = serde_json::to_value(&current).map_err(|e| Error::Template(name.to_string(), e))?;
    let count = value
        .pointer("/status/collisionCount")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok());
    if count != seen {
        return Err(Error::StaleCollisionCount {
            owner: name.to_string(),
            seen,
            current: count,
        });
    }
    // UpdateStatus, as upstream: the controllers' roles grant `update` on the status, not
    // `patch`.
    let bumped = json!(count.unwrap_or(0).saturating_add(1));
    crate::util::update::status(owners, &current, |v| {
        v["status"]["collisionCount"] = bumped.clone();
    })
    .await?;
    Ok(())
}

#[cfg(test)]
#[allow(
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;

    fn rev(name: &str, revision: i64, image: &str) -> Shared<ControllerRevision> {
        let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": image}]}});
        Cached::shared(ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("ds-{name}")),
                labels: Some([(CONTROLLER_REVISION_HASH.to_string(), name.to_string())].into()),
                ..Default::default()
            },
            data: Some(RawExtension(revision_data(&template))),
            revision,
        })
    }

    fn template(image: &str) -> Value {
        json!({"spec": {"containers": [{"image": image, "name": "c"}]}, "metadata": {"labels": {"app": "x"}}})
    }

    #[test]
    fn data_is_a_replace_patch_and_round_trips() {
        let t = template("nginx:1");
        let data = revision_data(&t);
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let r = ControllerRevision {
            data: Some(RawExtension(data)),
            ..Default::default()
        };
        assert_eq!(revision_template(&r), Some(canonical_template(&t)));
        // Key order does not matter.
        assert!(matches(&r, &t));
        assert!(!matches(&r, &template("nginx:2")));
    }

    /// The bytes of upstream's revision for the e2e suite's DaemonSet (v1.28.4's
    /// kube-controller-manager), which its `daemon.Match` compares with.
    #[test]
    fn data_is_byte_for_byte_upstreams() {
        let served = json!({"metadata":{"labels":{"daemonset-name":"daemon-set"}},"spec":{"containers":[{"image":"registry.k8s.io/e2e-test-images/httpd:2.4.38-4","name":"app","ports":[{"containerPort":9376,"protocol":"TCP"}],"resources":{},"securityContext":{},"imagePullPolicy":"IfNotPresent","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"nodeSelector":{"probe":"none"},"securityContext":{},"dnsPolicy":"ClusterFirst","restartPolicy":"Always","terminationGracePeriodSeconds":30,"schedulerName":"default-scheduler"}});
        let upstream = r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"daemonset-name":"daemon-set"}},"spec":{"containers":[{"image":"registry.k8s.io/e2e-test-images/httpd:2.4.38-4","imagePullPolicy":"IfNotPresent","name":"app","ports":[{"containerPort":9376,"protocol":"TCP"}],"resources":{},"securityContext":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","nodeSelector":{"probe":"none"},"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}"#;
        let data = revision_data(&served);
        assert_eq!(serde_json::to_string(&data).unwrap(), upstream);
        // As a ControllerRevision's data, through the typed object and back.
        let r = ControllerRevision {
            data: Some(RawExtension(data)),
            ..Default::default()
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(&format!("\"data\":{upstream}")), "{text}");
    }

    #[test]
    fn a_revision_recorded_in_another_form_still_matches() {
        let t = template("nginx:1");
        let mut legacy = t.clone();
        legacy["$patch"] = json!("replace");
        let r = ControllerRevision {
            data: Some(RawExtension(json!({"spec": {"template": legacy}}))),
            ..Default::default()
        };
        assert!(matches(&r, &t));
        assert!(!matches(&r, &template("nginx:2")));
    }

    #[test]
    fn split_finds_the_current_revision() {
        let revs = vec![rev("a", 1, "v1"), rev("b", 2, "v2"), rev("c", 3, "v1")];
        let (cur, old) = split(revs, &template("v1"));
        let names = |v: &[Shared<ControllerRevision>]| {
            v.iter()
                .map(|r| r.metadata.name.clone().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&cur), ["ds-a", "ds-c"]);
        assert_eq!(names(&old), ["ds-b"]);
        assert_eq!(max_revision(&old), 2);
    }

    #[test]
    fn dedupe_keeps_the_highest_revision_last_of_equals() {
        let cases: Vec<(Vec<i64>, Option<usize>)> = vec![
            (vec![], None),
            (vec![4], Some(0)),
            (vec![1, 5, 3], Some(1)),
            (vec![2, 2], Some(1)),
            (vec![7, 2, 7, 1], Some(2)),
        ];
        for (revisions, want) in cases {
            let revs: Vec<_> = revisions
                .iter()
                .enumerate()
                .map(|(i, r)| rev(&i.to_string(), *r, "v"))
                .collect();
            assert_eq!(keep_of_duplicates(&revs), want, "{revisions:?}");
        }
    }

    #[test]
    fn truncation_deletes_the_oldest_beyond_the_limit_but_not_live_ones() {
        // (old revisions (hash, revision), limit, live hashes, want deleted)
        let cases: Vec<(Vec<(&str, i64)>, i32, Vec<&str>, Vec<&str>)> = vec![
            (vec![("a", 1), ("b", 2)], 10, vec![], vec![]),
            (vec![("a", 1), ("b", 2), ("c", 3)], 2, vec![], vec!["a"]),
            (
                vec![("c", 3), ("a", 1), ("b", 2)],
                1,
                vec![],
                vec!["a", "b"],
            ),
            (
                vec![("a", 1), ("b", 2), ("c", 3)],
                1,
                vec!["a"],
                vec!["b", "c"],
            ),
            (
                vec![("a", 1), ("b", 2), ("c", 3)],
                0,
                vec!["b"],
                vec!["a", "c"],
            ),
            (vec![("a", 1), ("b", 2)], 0, vec!["a", "b"], vec![]),
            (vec![("a", 1)], -1, vec![], vec!["a"]),
        ];
        for (old, limit, live, want) in cases {
            let old: Vec<_> = old.iter().map(|(h, r)| rev(h, *r, h)).collect();
            let live: HashSet<String> = live.iter().map(|s| s.to_string()).collect();
            let got: Vec<String> = to_truncate(&old, limit, &live)
                .iter()
                .map(|r| hash_of(&r.metadata).unwrap().to_string())
                .collect();
            assert_eq!(got, want, "limit {limit} live {live:?}");
        }
    }

    #[test]
    fn a_new_revision_is_named_labelled_and_owned() {
        let meta = ObjectMeta {
            name: Some("fluentd".into()),
            namespace: Some("kube-system".into()),
            uid: Some("u1".into()),
            annotations: Some(
                [(
                    "kubernetes.io/change-cause".to_string(),
                    "image v2".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let t = template("v2");
        let owner = Owner {
            meta: &meta,
            api_version: "apps/v1",
            kind: "DaemonSet",
            template: &t,
            collision_count: None,
        };
        let r = new_revision(&owner, 3);
        let hash = owner.hash();
        assert_eq!(
            r.metadata.name.as_deref(),
            Some(format!("fluentd-{hash}").as_str())
        );
        assert_eq!(hash_of(&r.metadata), Some(hash.as_str()));
        assert_eq!(r.metadata.labels.as_ref().unwrap()["app"], "x");
        assert_eq!(
            r.metadata.annotations.as_ref().unwrap()["kubernetes.io/change-cause"],
            "image v2"
        );
        let owner_ref = &r.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner_ref.kind.as_str(),
                owner_ref.uid.as_str(),
                owner_ref.controller
            ),
            ("DaemonSet", "u1", Some(true))
        );
        assert_eq!(r.revision, 3);
        assert!(matches(&r, &t));
        // A collision count changes the name.
        let bumped = Owner {
            collision_count: Some(1),
            ..owner
        };
        assert_ne!(bumped.hash(), hash);
    }
}
