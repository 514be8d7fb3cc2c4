//! The API writes of one StatefulSet sync (upstream's `stateful_pod_control.go`): create a pod
//! after its claims, delete a pod (by uid, so a stale cache never deletes its replacement),
//! patch a pod in place, repair a pod's identity labels, and set a claim's owners. Each write
//! records upstream's event on the set ("create Pod web-0 in StatefulSet web successful").

use super::{Error, Set, pods, volumes};
use crate::is_status;
use events::{EventType, Recorder};
use informer::Shared;
use k8s_openapi::{
    api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
};
use serde_json::{Value, json};

/// What a write that did not fail did: whether the watch will show a change for it. A write the
/// server found moot (the pod exists already, is gone, or changed since) will never be observed,
/// so the caller lowers its expectation at once, as upstream does on `NotFound`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server changed the object; its watch event will follow.
    Written,
    /// Nothing changed.
    Moot,
}

/// The writes for one set.
pub struct PodControl<'a> {
    set: &'a Set,
    pods: Api<Pod>,
    claims: Api<PersistentVolumeClaim>,
    recorder: &'a Recorder,
    reference: ObjectReference,
}

impl<'a> PodControl<'a> {
    /// Writes for `set` through `client`, recording events with `recorder`.
    pub fn new(client: &Client, recorder: &'a Recorder, set: &'a Set) -> Self {
        let ns = set.sts.namespace().unwrap_or_default();
        Self {
            set,
            pods: Api::namespaced(client.clone(), &ns),
            claims: Api::namespaced(client.clone(), &ns),
            recorder,
            reference: events::reference(&set.sts),
        }
    }

    fn event(&self, verb: &str, what: &str, result: &Result<(), String>) {
        let set = self.set.name();
        let title = |v: &str| {
            let mut c = v.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        };
        match result {
            Ok(()) => self.recorder.record(
                &self.reference,
                EventType::Normal,
                &format!("Successful{}", title(verb)),
                format!("{verb} {what} in StatefulSet {set} successful"),
            ),
            Err(e) => self.recorder.record(
                &self.reference,
                EventType::Warning,
                &format!("Failed{}", title(verb)),
                format!("{verb} {what} in StatefulSet {set} failed error: {e}"),
            ),
        }
    }

    /// Creates the claims of `ordinal` that `existing` (the cache) does not hold. A claim still
    /// being deleted from an earlier life of the ordinal makes the pod wait
    /// ([`Error::ClaimTerminating`]), as upstream's `PodClaimIsStale`.
    pub async fn create_claims(
        &self,
        ordinal: i32,
        existing: impl Fn(&str) -> Option<Shared<PersistentVolumeClaim>>,
    ) -> Result<(), Error> {
        let pod = pods::pod_name(self.set.name(), ordinal);
        for claim in volumes::claims_for(&self.set.sts, ordinal) {
            let name = claim.name_any();
            if let Some(found) = existing(&name) {
                if found.metadata.deletion_timestamp.is_some() {
                    return Err(Error::ClaimTerminating(name));
                }
                continue;
            }
            let result = match self.claims.create(&PostParams::default(), &claim).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 409) => continue,
                Err(e) => Err(e),
            };
            let shown = result
                .as_ref()
                .map(|_| ())
                .map_err(crate::api_error::message);
            let set = self.set.name();
            match &shown {
                Ok(()) => self.recorder.record(
                    &self.reference,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("create Claim {name} Pod {pod} in StatefulSet {set} success"),
                ),
                Err(e) => self.recorder.record(
                    &self.reference,
                    EventType::Warning,
                    "FailedCreate",
                    format!(
                        "create Claim {name} for Pod {pod} in StatefulSet {set} failed error: {e}"
                    ),
                ),
            }
            result?;
        }
        Ok(())
    }

    /// Creates `pod`; one that exists already is fine (the cache lags).
    pub async fn create_pod(&self, pod: &Pod) -> Result<Outcome, Error> {
        let what = format!("Pod {}", pod.name_any());
        match self.pods.create(&PostParams::default(), pod).await {
            Ok(_) => {
                self.event("create", &what, &Ok(()));
                Ok(Outcome::Written)
            }
            Err(e) if is_status(&e, 409) => Ok(Outcome::Moot),
            Err(e) => {
                self.event("create", &what, &Err(crate::api_error::message(&e)));
                Err(e.into())
            }
        }
    }

    /// Deletes `pod` if it is still the one the cache showed (same uid); gone already is fine.
    pub async fn delete_pod(&self, pod: &Pod) -> Result<Outcome, Error> {
        let name = pod.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        let what = format!("Pod {name}");
        match self.pods.delete(&name, &params).await {
            Ok(_) => {
                self.event("delete", &what, &Ok(()));
                Ok(Outcome::Written)
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(Outcome::Moot),
            Err(e) => {
                self.event("delete", &what, &Err(crate::api_error::message(&e)));
                Err(e.into())
            }
        }
    }

    /// Applies an in-place patch ([`super::update::in_place_patch`]); a pod that changed since
    /// (conflict) or is gone is left to the next sync.
    pub async fn update_in_place(&self, pod: &Pod, patch: &Value) -> Result<Outcome, Error> {
        let name = pod.name_any();
        match self
            .pods
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                self.recorder.record(
                    &self.reference,
                    EventType::Normal,
                    "SuccessfulUpdatePodInPlace",
                    format!(
                        "update Pod {name} in StatefulSet {} in place successful",
                        self.set.name()
                    ),
                );
                Ok(Outcome::Written)
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(Outcome::Moot),
            Err(e) => {
                self.event(
                    "update",
                    &format!("Pod {name}"),
                    &Err(crate::api_error::message(&e)),
                );
                Err(e.into())
            }
        }
    }

    /// Gives `pod` the identity labels of `ordinal` (upstream's `UpdateStatefulPod`; a pod's
    /// hostname, subdomain and volumes are immutable, so only labels can be repaired).
    pub async fn repair_identity(&self, pod: &Pod, ordinal: i32) -> Result<(), Error> {
        let name = pod.name_any();
        let patch = json!({"metadata": {
            "labels": {pods::POD_NAME_LABEL: name, pods::POD_INDEX_LABEL: ordinal.to_string()},
            "resourceVersion": pod.metadata.resource_version,
        }});
        let result = self
            .pods
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await;
        match result {
            Ok(_) => {
                self.event("update", &format!("Pod {name}"), &Ok(()));
                Ok(())
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => {
                self.event(
                    "update",
                    &format!("Pod {name}"),
                    &Err(crate::api_error::message(&e)),
                );
                Err(e.into())
            }
        }
    }

    /// Sets `claim`'s owner references (the retention policy's ownership).
    pub async fn set_claim_owners(
        &self,
        claim: &PersistentVolumeClaim,
        owners: Vec<OwnerReference>,
    ) -> Result<(), Error> {
        // An update of the claim read (upstream's UpdateClaim): the role grants `update` on
        // claims, not `patch`.
        let owners = json!(owners);
        let set = |v: &mut Value| v["metadata"]["ownerReferences"] = owners.clone();
        match crate::update::object(&self.claims, claim, set).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
