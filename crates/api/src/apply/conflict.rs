//! Apply conflicts: fields another manager owns whose value an apply would change.

use super::{managed::ManagedEntry, path::Path};
use std::fmt;

/// One conflicting field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager, as upstream prints it (see [`ManagedEntry::describe`]).
    pub manager: String,
    /// The field.
    pub path: Path,
}

/// The conflicts of a refused apply, ordered by manager then field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// Collects the conflicts of each manager's conflicting set.
    pub(crate) fn from_managers<'a>(
        sets: impl IntoIterator<Item = (&'a ManagedEntry, super::set::FieldSet)>,
    ) -> Self {
        let mut out: Vec<Conflict> = sets
            .into_iter()
            .flat_map(|(entry, set)| {
                let manager = entry.describe();
                set.paths().into_iter().map(move |path| Conflict {
                    manager: manager.clone(),
                    path,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.manager, &a.path).cmp(&(&b.manager, &b.path)));
        out.dedup();
        Conflicts(out)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Upstream's message: one conflict on one line, several grouped by manager.
impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.0.as_slice() {
            return write!(
                f,
                "Apply failed with 1 conflict: conflict with {}: {}",
                only.manager, only.path
            );
        }
        write!(f, "Apply failed with {} conflicts: ", self.0.len())?;
        let mut lines = Vec::new();
        let mut current: Option<&str> = None;
        for c in &self.0 {
            if current != Some(c.manager.as_str()) {
                lines.push(format!("conflicts with {}:", c.manager));
                current = Some(&c.manager);
            }
            lines.push(format!("- {}", c.path));
        }
        write!(f, "{}", lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_as_upstream() {
        let one = Conflicts(vec![Conflict {
            manager: r#""kubectl-client-side-apply" using apps/v1"#.into(),
            path: Path::fields(&["spec", "replicas"]),
        }]);
        assert_eq!(
            one.to_string(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
        );
        let two = Conflicts(vec![
            Conflict {
                manager: r#""a""#.into(),
                path: Path::fields(&["data", "x"]),
            },
            Conflict {
                manager: r#""a""#.into(),
                path: Path::fields(&["data", "y"]),
            },
            Conflict {
                manager: r#""b""#.into(),
                path: Path::fields(&["data", "x"]),
            },
        ]);
        assert_eq!(
            two.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .data.x\n- .data.y\nconflicts with \"b\":\n- .data.x"
        );
    }
}
