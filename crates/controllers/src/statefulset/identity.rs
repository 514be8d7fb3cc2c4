//! The writes that give a StatefulSet's pod its identity beyond the pod itself (upstream's
//! `stateful_pod_control.go`, whose pod creates, deletes and patches are [`crate::util::pod_control`]'s):
//! the claims of an ordinal, created before its pod; the claims' owners, as the retention policy
//! says; and a pod's identity labels, repaired. Each records upstream's event on the set.

use super::{Error, Set, pods, volumes};
use crate::util::api_error::{self, is_status};
use events::{EventType, Recorder};
use informer::Shared;
use k8s_openapi::{
    api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// The identity writes for one set.
pub struct Identity<'a> {
    set: &'a Set,
    pods: Api<Pod>,
    claims: Api<PersistentVolumeClaim>,
    recorder: &'a Recorder,
    reference: ObjectReference,
}

impl<'a> Identity<'a> {
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
            let shown = result.as_ref().map(|_| ()).map_err(api_error::message);
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
        let set = self.set.name();
        match result {
            Ok(_) => {
                self.recorder.record(
                    &self.reference,
                    EventType::Normal,
                    "SuccessfulUpdate",
                    format!("update Pod {name} in StatefulSet {set} successful"),
                );
                Ok(())
            }
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => {
                self.recorder.record(
                    &self.reference,
                    EventType::Warning,
                    "FailedUpdate",
                    format!(
                        "update Pod {name} in StatefulSet {set} failed error: {}",
                        api_error::message(&e)
                    ),
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
        match crate::util::update::object(&self.claims, claim, set).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
