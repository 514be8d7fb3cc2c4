//! Adoption and release of children by a controller's selector, as upstream's
//! `ControllerRefManager`: a controller claims the children it controls that still match its
//! selector, adopts matching orphans, and releases controlled children that no longer match.
//!
//! Adoption is a strategic-merge patch that adds the controller reference and names the child's
//! uid (so a recreated child with the same name is not adopted by mistake); release deletes the
//! reference by uid. Before the first adoption the owner is re-read from the API server, not the
//! cache, so an owner that is being deleted never adopts (upstream's `RecheckDeletionTimestamp`).

use api::pod::controller_of;
use informer::{Cached, Object, Shared};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;
use std::future::Future;

/// What a controller does with one candidate child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by this owner and matching: it is ours.
    Keep,
    /// An orphan that matches: adopt it.
    Adopt,
    /// Controlled by this owner but no longer matching: release it.
    Release,
    /// Someone else's, or not ours to touch now.
    Ignore,
}

/// Decides the fate of a child with metadata `child` for the owner with `owner_uid`.
pub fn decide(owner_uid: &str, owner_deleting: bool, child: &ObjectMeta, matches: bool) -> Claim {
    match controller_of(child) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Keep,
        // An owner being deleted neither releases nor adopts: the garbage collector decides.
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner_deleting || !matches || child.deletion_timestamp.is_some() => Claim::Ignore,
        None => Claim::Adopt,
    }
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Claims `candidates` for the owner behind `controller` (a controller reference to it):
/// returns the children it controls afterwards. `can_adopt` is asked once, before the first
/// adoption. Every candidate is handled even if one fails; the first error is returned then.
pub async fn claim<K, F, Fut>(
    api: &Api<K>,
    controller: &OwnerReference,
    owner_deleting: bool,
    candidates: Vec<Shared<K>>,
    matches: impl Fn(&K) -> bool,
    can_adopt: F,
) -> Result<Vec<Shared<K>>, kube::Error>
where
    K: Object,
    K::DynamicType: Default,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<bool, kube::Error>>,
{
    let mut claimed = Vec::with_capacity(candidates.len());
    let mut first_error = None;
    let mut can_adopt = Some(can_adopt);
    let mut adoption_allowed: Option<bool> = None;
    for child in candidates {
        let meta = child.meta();
        let name = meta.name.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        match decide(&controller.uid, owner_deleting, meta, matches(&child)) {
            Claim::Keep => claimed.push(child),
            Claim::Ignore => {}
            Claim::Adopt => {
                if adoption_allowed.is_none() {
                    let check = can_adopt.take().map(|f| f());
                    adoption_allowed = Some(match check {
                        Some(fut) => match fut.await {
                            Ok(ok) => ok,
                            Err(e) => {
                                first_error.get_or_insert(e);
                                false
                            }
                        },
                        None => false,
                    });
                }
                if adoption_allowed != Some(true) {
                    continue;
                }
                let patch = json!({"metadata": {"ownerReferences": [controller], "uid": uid}});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Ok(adopted) => claimed.push(Cached::shared(adopted)),
                    Err(e) if is_gone(&e) => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            Claim::Release => {
                let patch = json!({"metadata": {
                    "ownerReferences": [{"$patch": "delete", "uid": controller.uid}],
                    "uid": uid,
                }});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                {
                    Ok(_) => {}
                    // Gone, or changed under us (the uid precondition): nothing left to release.
                    Err(e) if is_gone(&e) => {}
                    Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(claimed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(controller: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: controller.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    #[test]
    fn claims_follow_upstream_controller_ref_manager() {
        // (case, child's controller, child deleting, owner deleting, selector matches, want)
        let cases = [
            (
                "ours and matching",
                Some("me"),
                false,
                false,
                true,
                Claim::Keep,
            ),
            (
                "ours and matching while the owner is deleted",
                Some("me"),
                false,
                true,
                true,
                Claim::Keep,
            ),
            (
                "ours, no longer matching",
                Some("me"),
                false,
                false,
                false,
                Claim::Release,
            ),
            (
                "ours, not matching, owner deleting",
                Some("me"),
                false,
                true,
                false,
                Claim::Ignore,
            ),
            (
                "someone else's, matching",
                Some("other"),
                false,
                false,
                true,
                Claim::Ignore,
            ),
            ("orphan matching", None, false, false, true, Claim::Adopt),
            (
                "orphan not matching",
                None,
                false,
                false,
                false,
                Claim::Ignore,
            ),
            (
                "orphan matching, owner deleting",
                None,
                false,
                true,
                true,
                Claim::Ignore,
            ),
            (
                "orphan matching but being deleted",
                None,
                true,
                false,
                true,
                Claim::Ignore,
            ),
        ];
        for (name, controller, child_deleting, owner_deleting, matches, want) in cases {
            let got = decide(
                "me",
                owner_deleting,
                &meta(controller, child_deleting),
                matches,
            );
            assert_eq!(got, want, "{name}");
        }
    }
}
