//! The subresources that are not plain views of the object: `scale` and pod `binding` (pod
//! `eviction` is in `eviction`). (`status` is the object itself with a narrower write; see
//! `admission`.)

use crate::{
    admission::{self, Part},
    change::Change,
    error::{ApiError, ApiResult},
    object,
    registry::Kind,
    registry::Subresource,
    request::{self, Params, Target},
    rest::json_response,
    state::ApiServer,
};
use axum::{
    http::{HeaderMap, StatusCode},
    response::Response,
};
use bytes::Bytes;
use serde_json::{Value, json};

/// The `autoscaling/v1` `Scale` view of a workload.
fn scale_of(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let pick = |k: &str| meta.get(k).cloned().unwrap_or(Value::Null);
    let selector = match obj.get("spec").and_then(|s| s.get("selector")) {
        // A ReplicationController's selector is a plain map of labels (its `matchLabels`).
        Some(Value::Object(m)) if m.values().all(Value::is_string) => {
            api::selector::LabelSelector::from_json(&json!({ "matchLabels": m }))
        }
        Some(s) => api::selector::LabelSelector::from_json(s),
        None => Ok(Default::default()),
    }
    .map(|s| s.to_string())
    .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
                     "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp")},
        "spec": {"replicas": object::path(obj, "spec.replicas").and_then(Value::as_i64).unwrap_or(0)},
        "status": {"replicas": object::path(obj, "status.replicas").and_then(Value::as_i64).unwrap_or(0),
                   "selector": selector},
    })
}

impl ApiServer {
    /// GET `.../scale`.
    pub(crate) async fn get_scale(&self, t: &Target) -> ApiResult<Response> {
        let name = t.name()?;
        self.sync_cache().await?;
        let entry = self
            .cache
            .get(&t.def, t.namespace.as_deref(), name)
            .ok_or_else(|| ApiError::not_found(&t.def, name))?;
        Ok(json_response(
            StatusCode::OK,
            scale_of(&entry.value()).to_string(),
        ))
    }

    /// PUT or PATCH `.../scale`: changes `spec.replicas` of the workload.
    pub(crate) async fn write_scale(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
        is_patch: bool,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let (bt, format) = request::body_type(headers)?;
        let input = request::decode(body, format)?;
        let options = if is_patch {
            "PatchOptions"
        } else {
            "UpdateOptions"
        };
        let manager = crate::managed_fields::field_manager(params, headers, options)?;
        let def = &*t.def;
        let outcome = self
            .guaranteed_update(
                def,
                t.namespace.as_deref(),
                name,
                params.dry_run()?,
                |old, rev| {
                    let current = scale_of(old);
                    let scale = if is_patch {
                        crate::patch::apply(bt, current, &input)?
                    } else {
                        input.clone()
                    };
                    if let Some(want) = request::parse_rv(object::resource_version(&scale))?
                        && want != rev
                    {
                        return Err(ApiError::stale(def, name));
                    }
                    let replicas = scale_replicas(def, name, &scale)?;
                    let mut next = old.clone();
                    next["spec"]["replicas"] = json!(replicas);
                    crate::managed_fields::track_subresource(
                        def,
                        old,
                        &mut next,
                        &manager,
                        Subresource::Scale,
                        |n| {
                            admission::prepare_update(def, n, old, Part::Main, &*self.cache)
                                .map(drop)
                        },
                    )?;
                    Ok(Change::Write(next))
                },
            )
            .await?;
        Ok(json_response(
            StatusCode::OK,
            scale_of(outcome.value()).to_string(),
        ))
    }

    /// POST `pods/{name}/binding`: assigns the pod to a node, once.
    pub(crate) async fn bind(
        &self,
        t: &Target,
        params: &Params,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> ApiResult<Response> {
        let name = t.name()?;
        let binding = request::decode_object(body, request::body_type(headers)?.1)?;
        let node = binding
            .get("target")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    &t.def,
                    name,
                    &[api::field::FieldError::required("target.name", "")],
                )
            })?
            .to_string();
        let def = &*t.def;
        self.guaranteed_update(
            def,
            t.namespace.as_deref(),
            name,
            params.dry_run()?,
            |old, _| {
                if object::is_deleting(old) {
                    return Err(ApiError::conflict(
                        def,
                        name,
                        "pod is being deleted, cannot be assigned to a host",
                    ));
                }
                if let Some(current) = object::path(old, "spec.nodeName")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    return Err(ApiError::conflict(
                        def,
                        name,
                        &format!("pod {name} is already assigned to node \"{current}\""),
                    ));
                }
                let mut next = old.clone();
                next["spec"]["nodeName"] = Value::String(node.clone());
                set_condition(&mut next, "PodScheduled", "True", None, None);
                Ok(Change::Write(next))
            },
        )
        .await?;
        Ok(json_response(StatusCode::CREATED, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}).to_string()))
    }
}

fn scale_replicas(def: &Kind, name: &str, scale: &Value) -> ApiResult<i64> {
    match object::path(scale, "spec.replicas") {
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => Ok(n),
            _ => Err(ApiError::invalid(
                def,
                name,
                &[api::field::FieldError::invalid(
                    "spec.replicas",
                    v.clone(),
                    "must be greater than or equal to 0",
                )],
            )),
        },
        None => Ok(0),
    }
}

/// Sets a status condition, keeping `lastTransitionTime` when the status does not change.
pub(crate) fn set_condition(
    obj: &mut Value,
    kind: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let now = object::now_rfc3339();
    let conds = &mut obj["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(list) = conds.as_array_mut() else {
        return;
    };
    let mut cond =
        json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        cond["reason"] = json!(r);
    }
    if let Some(m) = message {
        cond["message"] = json!(m);
    }
    match list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(status) {
                cond["lastTransitionTime"] = existing
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or(json!(now));
            }
            *existing = cond;
        }
        None => list.push(cond),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_selectors_of_label_selectors_and_plain_maps() {
        let cases = [
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                "app=web,tier",
            ),
            // A ReplicationController's.
            (json!({"tier": "fe", "app": "web"}), "app=web,tier=fe"),
            (json!({}), ""),
        ];
        for (selector, want) in cases {
            let obj =
                json!({"spec": {"replicas": 2, "selector": selector}, "status": {"replicas": 1}});
            let scale = scale_of(&obj);
            assert_eq!(scale["status"]["selector"], json!(want), "{selector}");
            assert_eq!(
                (&scale["spec"]["replicas"], &scale["status"]["replicas"]),
                (&json!(2), &json!(1))
            );
        }
        assert_eq!(
            scale_of(&json!({"spec": {}}))["status"]["selector"],
            json!("")
        );
    }
}
