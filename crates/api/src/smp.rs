//! Strategic merge patch, the server side of `kubectl apply` and `kubectl patch --type=strategic`.
//!
//! Follows upstream apimachinery `strategicpatch` (`StrategicMergeMapPatch` with parallel lists
//! merged and unmatched nulls ignored):
//!
//! - Maps merge recursively; a `null` in the patch deletes the key.
//! - Lists are merged according to a [`MergeSchema`]: by a merge key ([`ListStrategy::Merge`]), as a
//!   set of primitives ([`ListStrategy::SetMerge`]) or replaced wholesale ([`ListStrategy::Replace`]).
//! - Directives: `$patch: replace|delete` in a map, `{"<key>": .., "$patch": "delete"}` and the
//!   `{"$patch": "replace"}` marker in merge-keyed lists, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`. Directive keys never appear
//!   in the result.
//!
//! Ordering of merged lists is upstream's: `$setElementOrder` wins, then the order of the patch
//! list, then the order of the live list. One consequence worth knowing: without
//! `$setElementOrder`, an item that only the patch has is placed *before* the live items that the
//! patch does not mention (upstream `mergeSortedSlice` cannot compare it with them). kubectl always
//! sends `$setElementOrder` with the patches it computes, so its results are ordered as expected.
//!
//! Deliberate differences from upstream, all about values the live object does not have yet:
//! upstream copies such a patch value verbatim (directives included, to be dropped later by the
//! typed decoder); we merge it into an empty value instead, so directives are applied and never
//! stored, and `null`s inside it are dropped.

use serde_json::{Map, Value};
use std::fmt::Write as _;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// How a list field is merged; upstream's `patchStrategy` / `patchMergeKey` struct tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch list replaces the live list (fields without a patch strategy, e.g. `tolerations`).
    Replace,
    /// Items are maps identified by `key`; patch items merge into the live item with the same key.
    Merge {
        /// The field that identifies an item, e.g. `name` for containers.
        key: &'static str,
    },
    /// Items are primitives merged as a set (e.g. `metadata.finalizers`).
    SetMerge,
}

/// Where list strategies come from: upstream reads them from Go struct tags, we ask a schema.
pub trait MergeSchema {
    /// The strategy of the list at `path`, the field names from the object root with list items
    /// transparent (Deployment containers are `["spec", "template", "spec", "containers"]`).
    fn list_strategy(&self, path: &[&str]) -> ListStrategy;
}

/// The [`MergeSchema`] of the built-in kinds rollwright serves (core, apps, batch).
///
/// Rule: a list is identified by its field name and the field name of its parent, which is enough
/// for every built-in kind because the pod spec is always reached through a field called `spec`
/// (`spec` of a Pod, `template.spec` of a PodTemplate, `spec.template.spec` of workloads,
/// `spec.jobTemplate.spec.template.spec` of a CronJob) and containers are always reached through
/// `containers`, `initContainers` or `ephemeralContainers`:
///
/// | parent | field | strategy |
/// | --- | --- | --- |
/// | `spec` | `containers`, `initContainers`, `ephemeralContainers`, `volumes`, `imagePullSecrets`, `resourceClaims`, `schedulingGates` | merge on `name` |
/// | `spec` | `hostAliases` | merge on `ip` |
/// | `spec` | `topologySpreadConstraints` | merge on `topologyKey` |
/// | `spec` | `ports` (Service) | merge on `port` |
/// | `spec` | `podCIDRs` (Node) | set merge |
/// | a container list | `env` | merge on `name` |
/// | a container list | `ports` | merge on `containerPort` |
/// | a container list | `volumeMounts` | merge on `mountPath` |
/// | a container list | `volumeDevices` | merge on `devicePath` |
/// | `metadata` | `finalizers` | set merge |
/// | `metadata` | `ownerReferences` | merge on `uid` |
/// | `status` | `conditions`, `addresses` (Node) | merge on `type` |
/// | `status` | `podIPs`, `hostIPs` | merge on `ip` |
///
/// Everything else is replaced, as upstream does for fields without a patch strategy: among them
/// `tolerations`, `envFrom`, `args`, `command`, `readinessGates`, Pod `status.containerStatuses`
/// and Node `spec.taints` (upstream's `patchMergeKey:"key"` tag sits on `Taint.key`, not on the
/// `taints` list, so the list itself has no strategy and is replaced).
#[derive(Clone, Copy, Debug, Default)]
pub struct Builtin;

impl MergeSchema for Builtin {
    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
        let [.., parent, field] = path else {
            return ListStrategy::Replace;
        };
        let merge = |key| ListStrategy::Merge { key };
        match (*parent, *field) {
            (
                "spec",
                "containers"
                | "initContainers"
                | "ephemeralContainers"
                | "volumes"
                | "imagePullSecrets"
                | "resourceClaims"
                | "schedulingGates",
            ) => merge("name"),
            ("spec", "hostAliases") => merge("ip"),
            ("spec", "topologySpreadConstraints") => merge("topologyKey"),
            ("spec", "ports") => merge("port"),
            ("spec", "podCIDRs") => ListStrategy::SetMerge,
            (p, "env") if CONTAINER_LISTS.contains(&p) => merge("name"),
            (p, "ports") if CONTAINER_LISTS.contains(&p) => merge("containerPort"),
            (p, "volumeMounts") if CONTAINER_LISTS.contains(&p) => merge("mountPath"),
            (p, "volumeDevices") if CONTAINER_LISTS.contains(&p) => merge("devicePath"),
            ("metadata", "finalizers") => ListStrategy::SetMerge,
            ("metadata", "ownerReferences") => merge("uid"),
            ("status", "conditions" | "addresses") => merge("type"),
            ("status", "podIPs" | "hostIPs") => merge("ip"),
            _ => ListStrategy::Replace,
        }
    }
}

/// Why a patch could not be applied; the messages are upstream's, so clients see the same text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SmpError {
    /// The patch (or the live object) is not a JSON object.
    #[error("invalid JSON document")]
    InvalidDocument,
    /// An item of a merge-keyed list lacks its merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    NoMergeKey {
        /// The offending item, printed as Go prints a map.
        map: String,
        /// The merge key.
        key: String,
    },
    /// `$patch` has a value other than `replace` or `delete` (or `merge` in a list).
    #[error("unknown patch type: {patch_type} in map: {map}")]
    BadPatchType {
        /// The `$patch` value.
        patch_type: String,
        /// The map holding it, printed as Go prints a map.
        map: String,
    },
    /// `{"$patch": "merge"}` in a list, which upstream rejects.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A value has the wrong JSON type, e.g. a string where a merge-keyed list needs a map.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type upstream expects.
        expected: &'static str,
        /// The Go type it got.
        actual: &'static str,
    },
    /// A merged list contains lists.
    #[error("lists of lists are not supported")]
    ListOfLists,
    /// A set-merged list mixes primitive types.
    #[error("list element types are not identical: {lists}")]
    MixedElementTypes {
        /// The lists involved, printed as Go prints them.
        lists: String,
    },
    /// A set-merged list holds maps, which need a merge key.
    #[error("cannot merge lists without merge key for {field}")]
    NoMergeKeyForList {
        /// The dotted path of the list.
        field: String,
    },
    /// `$retainKeys` is not a list, or the patch sets a key it does not retain.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeys,
    /// `$setElementOrder/<field>` is not a list.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrder,
    /// The patch list is not in the order that `$setElementOrder` gives.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    SetElementOrderMismatch {
        /// The patch list, printed as Go prints it.
        patch: String,
        /// The order list, printed as Go prints it.
        order: String,
    },
    /// `$deleteFromPrimitiveList/<field>` is not a list of primitives.
    #[error("invalid patch format of primitive list")]
    BadPrimitiveList,
}

/// Applies a strategic merge `patch` to `original`, returning the patched object.
///
/// `original` may be `null` (treated as `{}`); both must otherwise be objects.
pub fn apply(original: &Value, patch: &Value, schema: &dyn MergeSchema) -> Result<Value, SmpError> {
    apply_owned(original.clone(), patch, schema)
}

/// [`apply`] to a document the caller gives up, which the merge then changes in place instead of
/// copying it first (an API server's patch already holds its own copy of the stored object).
pub fn apply_owned(
    original: Value,
    patch: &Value,
    schema: &dyn MergeSchema,
) -> Result<Value, SmpError> {
    let Value::Object(patch) = patch else {
        return Err(SmpError::InvalidDocument);
    };
    let original = match original {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => return Err(SmpError::InvalidDocument),
    };
    let mut merger = Merger {
        schema,
        path: Vec::new(),
    };
    merger.merge_map(original, patch).map(Value::Object)
}

/// The walk over a patch: the schema and the path of field names down to the current value.
struct Merger<'s, 'p> {
    schema: &'s dyn MergeSchema,
    path: Vec<&'p str>,
}

impl<'p> Merger<'_, 'p> {
    fn strategy(&self) -> ListStrategy {
        self.schema.list_strategy(&self.path)
    }

    fn merge_map(
        &mut self,
        mut original: Map<String, Value>,
        patch: &'p Map<String, Value>,
    ) -> Result<Map<String, Value>, SmpError> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            match directive.as_str() {
                // Upstream returns an empty map, which stays in the parent as `{}`.
                Some("delete") => return Ok(Map::new()),
                Some("replace") => original = Map::new(),
                _ => {
                    return Err(SmpError::BadPatchType {
                        patch_type: go_string(directive),
                        map: go_map(patch),
                    });
                }
            }
        }

        if let Some(retain) = patch.get(RETAIN_KEYS) {
            let Value::Array(retain) = retain else {
                return Err(SmpError::BadRetainKeys);
            };
            let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
            for (k, v) in patch {
                if !v.is_null() && !is_directive_key(k) && !retained(k) {
                    return Err(SmpError::BadRetainKeys);
                }
            }
            original.retain(|k, _| retained(k));
        }

        // `$setElementOrder` lists are merged together with their field, before everything else.
        let mut ordered: Vec<&'p str> = Vec::new();
        for (k, order) in patch {
            let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            let Value::Array(order) = order else {
                return Err(SmpError::BadSetElementOrder);
            };
            ordered.push(field);
            let patch_list = match patch.get(field) {
                None => None,
                Some(Value::Array(list)) => Some(list.as_slice()),
                Some(other) => return Err(bad_arg("[]interface {}", other)),
            };
            let original_list = match original.shift_remove(field) {
                None => None,
                Some(Value::Array(list)) => Some(list),
                Some(other) => return Err(bad_arg("[]interface {}", &other)),
            };
            self.path.push(field);
            let merged = self.merge_ordered_list(original_list, patch_list, order)?;
            self.path.pop();
            if let Some(merged) = merged {
                original.insert(field.to_owned(), Value::Array(merged));
            }
        }

        let mut deletions = Vec::new();
        for (k, patch_value) in patch {
            if k == DIRECTIVE || k == RETAIN_KEYS || k.starts_with(SET_ELEMENT_ORDER) {
                continue;
            }
            if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                deletions.push((field, patch_value));
                continue;
            }
            if ordered.contains(&k.as_str()) {
                continue;
            }
            if patch_value.is_null() {
                original.shift_remove(k);
                continue;
            }
            self.path.push(k);
            let merged = match original.get_mut(k).map(std::mem::take) {
                Some(Value::Object(live)) if patch_value.is_object() => {
                    self.merge_value(Value::Object(live), patch_value)?
                }
                Some(Value::Array(live)) if patch_value.is_array() => {
                    self.merge_value(Value::Array(live), patch_value)?
                }
                _ => self.fresh(patch_value)?,
            };
            self.path.pop();
            original.insert(k.clone(), merged);
        }

        // Deletions from primitive lists come last, after any addition to the same list.
        for (field, values) in deletions {
            let Value::Array(values) = values else {
                return Err(SmpError::BadPrimitiveList);
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                if list.iter().chain(values).any(is_composite) {
                    return Err(SmpError::BadPrimitiveList);
                }
                list.retain(|v| !values.iter().any(|d| scalar_eq(d, v)));
            }
        }
        Ok(original)
    }

    /// Merges two values of the same container type (map with map, list with list).
    fn merge_value(&mut self, live: Value, patch: &'p Value) -> Result<Value, SmpError> {
        match (live, patch) {
            (Value::Object(live), Value::Object(patch)) => {
                Ok(Value::Object(self.merge_map(live, patch)?))
            }
            (Value::Array(live), Value::Array(patch)) => {
                let strategy = self.strategy();
                Ok(Value::Array(self.merge_list(live, patch, strategy)?))
            }
            _ => self.fresh(patch),
        }
    }

    /// A patch value with nothing to merge into: merged into an empty value so that its
    /// directives are applied rather than stored.
    fn fresh(&mut self, patch: &'p Value) -> Result<Value, SmpError> {
        match patch {
            Value::Object(patch) => Ok(Value::Object(self.merge_map(Map::new(), patch)?)),
            Value::Array(patch) => {
                let strategy = self.strategy();
                Ok(Value::Array(self.merge_list(
                    Vec::new(),
                    patch,
                    strategy,
                )?))
            }
            scalar => Ok(go_scalar(scalar)),
        }
    }

    fn merge_list(
        &mut self,
        original: Vec<Value>,
        patch: &'p [Value],
        strategy: ListStrategy,
    ) -> Result<Vec<Value>, SmpError> {
        match strategy {
            ListStrategy::Replace => self.replace_list(patch),
            ListStrategy::SetMerge => self.merge_primitive_list(original, patch),
            ListStrategy::Merge { key } => self.merge_keyed_list(original, patch, key),
        }
    }

    fn replace_list(&mut self, patch: &'p [Value]) -> Result<Vec<Value>, SmpError> {
        let mut out = Vec::with_capacity(patch.len());
        for item in patch {
            match item {
                // List-level directives mean nothing in a list that is replaced anyway; they are
                // dropped rather than stored.
                Value::Object(map)
                    if map.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
                        || (map.len() == 1 && map.contains_key(DIRECTIVE)) => {}
                Value::Object(map) => out.push(Value::Object(self.merge_map(Map::new(), map)?)),
                Value::Array(list) => {
                    out.push(Value::Array(self.replace_list(list)?));
                }
                scalar => out.push(go_scalar(scalar)),
            }
        }
        Ok(out)
    }

    fn merge_primitive_list(
        &mut self,
        original: Vec<Value>,
        patch: &'p [Value],
    ) -> Result<Vec<Value>, SmpError> {
        let mut first: Option<&Value> = None;
        for item in original.iter().chain(patch) {
            match first {
                None if item.is_array() => return Err(SmpError::ListOfLists),
                None => first = Some(item),
                Some(f) if kind(f) != kind(item) => {
                    return Err(SmpError::MixedElementTypes {
                        lists: format!("[{} {}]", go_list(&original), go_list(patch)),
                    });
                }
                Some(_) => {}
            }
        }
        if first.is_some_and(Value::is_object) {
            return Err(SmpError::NoMergeKeyForList {
                field: self.path.join("."),
            });
        }
        let server_order = original.clone();
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for item in original.into_iter().chain(patch.iter().map(go_scalar)) {
            if !merged.iter().any(|m| scalar_eq(m, &item)) {
                merged.push(item);
            }
        }
        let (in_patch, server_only) = merged
            .into_iter()
            .partition(|v| patch.iter().any(|p| scalar_eq(p, v)));
        Ok(normalize_order(
            in_patch,
            server_only,
            patch,
            &server_order,
            None,
        ))
    }

    fn merge_keyed_list(
        &mut self,
        mut original: Vec<Value>,
        patch: &'p [Value],
        key: &'static str,
    ) -> Result<Vec<Value>, SmpError> {
        for item in original.iter().chain(patch) {
            match item {
                Value::Object(_) => {}
                Value::Array(_) => return Err(SmpError::ListOfLists),
                other => return Err(bad_arg("map[string]interface {}", other)),
            }
        }

        let mut items: Vec<&'p Map<String, Value>> = Vec::with_capacity(patch.len());
        let mut replace = false;
        for map in patch.iter().filter_map(Value::as_object) {
            let Some(directive) = map.get(DIRECTIVE) else {
                items.push(map);
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    let Some(id) = map.get(key) else {
                        return Err(no_merge_key(map, key));
                    };
                    original.retain(|o| !o.get(key).is_some_and(|v| scalar_eq(v, id)));
                }
                Some("replace") => replace = true,
                Some("merge") => return Err(SmpError::MergeDirectiveInList),
                _ => {
                    return Err(SmpError::BadPatchType {
                        patch_type: go_string(directive),
                        map: go_map(map),
                    });
                }
            }
        }

        if replace {
            let mut out = Vec::with_capacity(items.len());
            for map in items {
                if !map.contains_key(key) {
                    return Err(no_merge_key(map, key));
                }
                out.push(Value::Object(self.merge_map(Map::new(), map)?));
            }
            return Ok(out);
        }

        let mut server_order = Vec::with_capacity(original.len());
        for item in &original {
            match item.get(key) {
                Some(id) => server_order.push(id.clone()),
                None => return Err(no_merge_key_value(item, key)),
            }
        }
        let mut patch_order = Vec::with_capacity(items.len());
        for map in items {
            let Some(id) = map.get(key) else {
                return Err(no_merge_key(map, key));
            };
            patch_order.push(id.clone());
            let found = original
                .iter()
                .position(|o| o.get(key).is_some_and(|v| scalar_eq(v, id)));
            match found {
                Some(i) => {
                    let live = match std::mem::take(&mut original[i]) {
                        Value::Object(live) => live,
                        _ => Map::new(),
                    };
                    original[i] = Value::Object(self.merge_map(live, map)?);
                }
                None => original.push(Value::Object(self.merge_map(Map::new(), map)?)),
            }
        }

        let (in_patch, server_only) = original.into_iter().partition(|v| {
            v.get(key)
                .is_some_and(|id| patch_order.iter().any(|p| scalar_eq(p, id)))
        });
        Ok(normalize_ids(
            in_patch,
            server_only,
            &patch_order,
            &server_order,
            Some(key),
        ))
    }

    /// Upstream `mergePatchIntoOriginal`: merge a list that has a `$setElementOrder`, then order it.
    fn merge_ordered_list(
        &mut self,
        original: Option<Vec<Value>>,
        patch: Option<&'p [Value]>,
        order: &'p [Value],
    ) -> Result<Option<Vec<Value>>, SmpError> {
        let strategy = self.strategy();
        let key = match strategy {
            ListStrategy::Merge { key } => Some(key),
            _ => None,
        };
        if let Some(patch) = patch {
            validate_order(patch, order, key)?;
        }
        let server_order = original.clone().unwrap_or_default();
        let merged = match (original, patch) {
            (None, None) => return Ok(None),
            (Some(original), None) => original,
            (original, Some(patch)) => {
                self.merge_list(original.unwrap_or_default(), patch, strategy)?
            }
        };
        if strategy == ListStrategy::Replace {
            return Ok(Some(merged));
        }
        if let Some(key) = key {
            for item in order {
                match item {
                    Value::Object(map) if !map.contains_key(key) => {
                        return Err(no_merge_key(map, key));
                    }
                    Value::Object(_) => {}
                    other => return Err(bad_arg("map[string]interface {}", other)),
                }
            }
        }
        let (in_order, server_only) = merged
            .into_iter()
            .partition(|v| index_of(order, v, key).is_some());
        Ok(Some(normalize_order(
            in_order,
            server_only,
            order,
            &server_order,
            key,
        )))
    }
}

/// Upstream `validatePatchWithSetOrderList`: the patch items (deletions aside) must appear in
/// `order`, in the same relative order.
fn validate_order(patch: &[Value], order: &[Value], key: Option<&str>) -> Result<(), SmpError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let mut items = Vec::with_capacity(patch.len());
    for item in patch {
        if key.is_some() {
            let Value::Object(map) = item else {
                return Err(bad_arg("map[string]interface {}", item));
            };
            if map.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                continue;
            }
        }
        items.push(item);
    }
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        if items[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        let equal = match key {
            None => scalar_eq(items[p], &order[o]),
            Some(key) => {
                let left = merge_key_of(items[p], key)?;
                let right = merge_key_of(&order[o], key)?;
                scalar_eq(left, right)
            }
        };
        if equal {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() && o >= order.len() {
        return Err(SmpError::SetElementOrderMismatch {
            patch: go_list(patch),
            order: go_list(order),
        });
    }
    Ok(())
}

fn merge_key_of<'v>(item: &'v Value, key: &str) -> Result<&'v Value, SmpError> {
    match item {
        Value::Object(map) => map.get(key).ok_or_else(|| no_merge_key(map, key)),
        other => Err(bad_arg("map[string]interface {}", other)),
    }
}

/// Upstream `normalizeElementOrder` over whole items: `patch_items` sorted by `patch_order`,
/// `server_only` by `server_order`, then interleaved by `server_order`.
fn normalize_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let ids = |list: &[Value]| -> Vec<Value> {
        list.iter()
            .filter_map(|v| identity(v, key).cloned())
            .collect()
    };
    normalize_ids(
        patch_items,
        server_only,
        &ids(patch_order),
        &ids(server_order),
        key,
    )
}

/// [`normalize_order`] with the orders given as identities (merge-key values or primitives).
fn normalize_ids(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let position = |order: &[Value], item: &Value| {
        identity(item, key).and_then(|id| order.iter().position(|o| scalar_eq(o, id)))
    };
    let sorted = |items: Vec<Value>, order: &[Value]| -> Vec<Value> {
        let mut keyed: Vec<(usize, Value)> = items
            .into_iter()
            .map(|v| (position(order, &v).unwrap_or(usize::MAX), v))
            .collect();
        keyed.sort_by_key(|(i, _)| *i);
        keyed.into_iter().map(|(_, v)| v).collect()
    };
    let right = sorted(patch_items, patch_order);
    let left = sorted(server_only, server_order);

    // Upstream `mergeSortedSlice`: a server-only item goes before a patch item only when both
    // are in the live list and it came first there; otherwise the patch item goes first.
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l), position(server_order, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// Upstream `index`: the position of `item` in `list`, by merge key or by value.
fn index_of(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    let id = identity(item, key)?;
    list.iter()
        .position(|v| identity(v, key).is_some_and(|other| scalar_eq(other, id)))
}

fn identity<'v>(item: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(key) => item.get(key),
        None => Some(item),
    }
}

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(SET_ELEMENT_ORDER)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

fn is_composite(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

/// A patch scalar as it comes out of upstream's float64 round trip: an integral float such as
/// `80.0` becomes `80`, so that integer fields stay integers.
fn go_scalar(v: &Value) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: beyond it, floats are not exact integers
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            #[allow(clippy::cast_possible_truncation)]
            Some(f) if f.fract() == 0.0 && f.abs() <= EXACT => Value::from(f as i64),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}

/// Equality as Go compares decoded JSON: numbers by value, whatever their representation.
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        _ => a == b,
    }
}

fn bad_arg(expected: &'static str, actual: &Value) -> SmpError {
    SmpError::BadArgType {
        expected,
        actual: go_type(actual),
    }
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> SmpError {
    SmpError::NoMergeKey {
        map: go_map(map),
        key: key.to_owned(),
    }
}

fn no_merge_key_value(item: &Value, key: &str) -> SmpError {
    SmpError::NoMergeKey {
        map: go_string(item),
        key: key.to_owned(),
    }
}

/// The Go type a JSON value decodes to, for upstream's type error messages.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A value printed as Go's `%v` prints decoded JSON (`map[k:v]`, `[a b]`), for error messages.
fn go_string(v: &Value) -> String {
    let mut out = String::new();
    write_go(&mut out, v);
    out
}

fn go_map(map: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_go_map(&mut out, map);
    out
}

fn go_list(list: &[Value]) -> String {
    let mut out = String::from("[");
    for (i, v) in list.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_go(&mut out, v);
    }
    out.push(']');
    out
}

fn write_go(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (None, None, Some(f)) => write_go_float(out, f),
            (None, None, None) => {
                let _ = write!(out, "{n}");
            }
        },
        Value::String(s) => out.push_str(s),
        Value::Array(list) => out.push_str(&go_list(list)),
        Value::Object(map) => write_go_map(out, map),
    }
}

fn write_go_map(out: &mut String, map: &Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    out.push_str("map[");
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push(':');
        write_go(out, v);
    }
    out.push(']');
}

/// Go's `%v` for a float64: shortest digits, exponent form below 1e-4 and from 1e6.
fn write_go_float(out: &mut String, f: f64) {
    let sci = format!("{f:e}");
    let exp: i32 = sci
        .rsplit_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    if (-4..6).contains(&exp) {
        let _ = write!(out, "{f}");
    } else if let Some((mantissa, _)) = sci.rsplit_once('e') {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{mantissa}e{sign}{:02}", exp.abs());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
