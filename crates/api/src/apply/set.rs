//! A set of field paths, stored as a trie, and its `fieldsV1` form.
//!
//! As upstream's `fieldpath.Set`: at each node, *members* are the steps whose whole value belongs
//! to the set, *children* the steps under which some deeper paths belong. A step may be both
//! (a list item that is owned and has owned fields): in `fieldsV1` that is written `".": {}`
//! inside the step's object.

use super::path::{BadKey, Path, PathElement};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A set of paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    /// Never holds an empty set.
    children: BTreeMap<PathElement, FieldSet>,
}

/// Why a `fieldsV1` value could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    /// A key is not `f:`, `k:`, `v:`, `i:` or `.`.
    #[error(transparent)]
    Key(#[from] BadKey),
    /// A value is not an object.
    #[error("fieldsV1 values must be objects")]
    NotAnObject,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is in the set.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Adds a step as a member of this node.
    pub(crate) fn insert_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    /// Attaches a child set under a step (nothing when it is empty).
    pub(crate) fn attach(&mut self, pe: PathElement, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        match self.children.get_mut(&pe) {
            Some(existing) => *existing = existing.union(&child),
            None => {
                self.children.insert(pe, child);
            }
        }
    }

    /// Whether the path is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether a step is a member of this node.
    pub(crate) fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The paths under a step, relative to it.
    pub(crate) fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// The steps of this node that are members.
    pub(crate) fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The steps of this node that have deeper paths, with them.
    pub(crate) fn children(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// Keeps only the steps of this node that `keep` accepts (with everything under them).
    pub(crate) fn retain_top(&mut self, keep: impl Fn(&PathElement) -> bool) {
        self.members.retain(|pe| keep(pe));
        self.children.retain(|pe, _| keep(pe));
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds the paths of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            match self.children.get_mut(pe) {
                Some(existing) => existing.union_with(c),
                None => {
                    self.children.insert(pe.clone(), c.clone());
                }
            }
        }
    }

    /// Removes the paths of `other` (structurally, as [`FieldSet::difference`]); returns whether
    /// anything went.
    pub fn subtract(&mut self, other: &FieldSet) -> bool {
        if other.is_empty() || self.is_empty() {
            return false;
        }
        let before = self.members.len();
        if !other.members.is_empty() {
            self.members.retain(|pe| !other.members.contains(pe));
        }
        let mut lost = self.members.len() != before;
        for (pe, o) in &other.children {
            if let Some(c) = self.children.get_mut(pe) {
                lost |= c.subtract(o);
                if c.is_empty() {
                    self.children.remove(pe);
                }
            }
        }
        lost
    }

    /// Whether the sets share a path (whether subtracting `other` would change `self`).
    pub fn intersects(&self, other: &FieldSet) -> bool {
        if self.is_empty() || other.is_empty() {
            return false;
        }
        let (small, large) = if self.members.len() <= other.members.len() {
            (&self.members, &other.members)
        } else {
            (&other.members, &self.members)
        };
        small.iter().any(|pe| large.contains(pe))
            || self
                .children
                .iter()
                .any(|(pe, c)| other.children.get(pe).is_some_and(|o| c.intersects(o)))
    }

    /// Removes the members `names` (fields) under the field path `at`, keeping what is below.
    pub(crate) fn remove_field_members(&mut self, at: &[&str], names: &[&str]) {
        match at {
            [] => self
                .members
                .retain(|pe| !pe.as_field().is_some_and(|f| names.contains(&f))),
            [first, rest @ ..] => {
                let pe = PathElement::field(first);
                if let Some(c) = self.children.get_mut(&pe) {
                    c.remove_field_members(rest, names);
                    if c.is_empty() {
                        self.children.remove(&pe);
                    }
                }
            }
        }
    }

    /// Paths in `self` that are not in `other`. Structural, as upstream's: a member of `other`
    /// removes that member, not the paths below it.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        if other.is_empty() {
            return self.clone();
        }
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            let rest = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        FieldSet { members, children }
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        if self.is_empty() || other.is_empty() {
            return FieldSet::new();
        }
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let both = c.intersection(o);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        // Members and children interleaved in step order, a member before its own children.
        let steps: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for pe in steps {
            prefix.push(pe.clone());
            if self.members.contains(pe) {
                out.push(Path(prefix.clone()));
            }
            if let Some(c) = self.children.get(pe) {
                c.collect_paths(prefix, out);
            }
            prefix.pop();
        }
    }

    /// The `fieldsV1` object of the set.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_map(false))
    }

    /// The `fieldsV1` object of this node; `dot` when the node itself is a member. Members and
    /// children are both sorted, so one merging pass writes them in order.
    fn fields_v1_map(&self, dot: bool) -> Map<String, Value> {
        let mut out = Map::with_capacity(self.members.len() + self.children.len() + 1);
        if dot {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(m), Some((c, _))) if m < c => {
                    out.insert(m.to_fields_key(), Value::Object(Map::new()));
                    members.next();
                }
                (Some(m), None) => {
                    out.insert(m.to_fields_key(), Value::Object(Map::new()));
                    members.next();
                }
                (_, Some((c, sub))) => {
                    let member = members.peek() == Some(c);
                    if member {
                        members.next();
                    }
                    out.insert(c.to_fields_key(), Value::Object(sub.fields_v1_map(member)));
                    children.next();
                }
            }
        }
        out
    }

    /// Reads a `fieldsV1` object.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsError> {
        let Value::Object(m) = v else {
            return Err(FieldsError::NotAnObject);
        };
        let mut set = FieldSet::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::from_fields_key(k)?;
            let Value::Object(cm) = child else {
                return Err(FieldsError::NotAnObject);
            };
            if cm.is_empty() || cm.contains_key(".") {
                set.members.insert(pe.clone());
            }
            let sub = FieldSet::from_fields_v1(child)?;
            set.attach(pe, sub);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(v: Value) -> FieldSet {
        FieldSet::from_fields_v1(&v).unwrap()
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_owned_items() {
        let v = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                },
                "f:replicas": {}
            }
        });
        let s = set(v.clone());
        assert_eq!(s.to_fields_v1(), v);
        assert!(s.has(&Path::fields(&["spec", "replicas"]).0));
        assert!(!s.has(&Path::fields(&["spec"]).0));
        let item = Path(vec![
            PathElement::field("spec"),
            PathElement::field("containers"),
            PathElement::key(vec![("name".into(), "\"nginx\"".into())]),
        ]);
        assert!(s.has(&item.0));
        assert!(FieldSet::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:y": 1})).is_err());
    }

    #[test]
    fn set_algebra_is_structural() {
        let a = set(json!({"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:data": {"f:k": {}}}));
        let b = set(json!({"f:spec": {"f:replicas": {}}, "f:data": {}}));
        assert_eq!(
            a.intersection(&b),
            set(json!({"f:spec": {"f:replicas": {}}}))
        );
        // `.data` as a member of `b` does not remove `.data.k`.
        assert_eq!(
            a.difference(&b),
            set(json!({"f:spec": {"f:paused": {}}, "f:data": {"f:k": {}}}))
        );
        assert_eq!(
            b.union(&a),
            set(
                json!({"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:data": {".": {}, "f:k": {}}})
            )
        );
        assert!(a.difference(&a).is_empty());
        let paths: Vec<String> = a.paths().iter().map(|p| p.to_string()).collect();
        assert_eq!(paths, [".data.k", ".spec.paused", ".spec.replicas"]);
    }
}
