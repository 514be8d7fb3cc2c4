//! Which controllers to run, as kube-controller-manager's `--controllers`: a comma-separated
//! list where `*` means every controller, `name` enables one and `-name` disables one
//! (`*,-garbagecollector`).

use std::{collections::BTreeSet, fmt, str::FromStr};

/// A bad `--controllers` list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown controller {name:?} in --controllers; known: {known}")]
pub struct UnknownController {
    /// The name given.
    pub name: String,
    /// The known names, comma-separated.
    pub known: String,
}

/// The parsed list; checked against the known names by [`Selection::resolve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    items: Vec<String>,
}

impl Default for Selection {
    /// Every controller.
    fn default() -> Self {
        Self {
            items: vec!["*".into()],
        }
    }
}

impl FromStr for Selection {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self {
            items: s
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .map(str::to_string)
                .collect(),
        })
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.items.join(","))
    }
}

impl Selection {
    /// Exactly these controllers.
    pub fn only<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            items: names.into_iter().map(str::to_string).collect(),
        }
    }

    /// The names among `known` this list enables: an explicit `name` or `-name` wins over `*`,
    /// whatever the order, as upstream's `IsControllerEnabled`.
    pub fn resolve<'a>(&self, known: &[&'a str]) -> Result<BTreeSet<&'a str>, UnknownController> {
        let mut on = BTreeSet::new();
        let mut off = BTreeSet::new();
        let mut star = false;
        for item in &self.items {
            if item == "*" {
                star = true;
                continue;
            }
            let (set, name) = match item.strip_prefix('-') {
                Some(n) => (&mut off, n),
                None => (&mut on, item.as_str()),
            };
            let Some(k) = known.iter().find(|k| **k == name) else {
                return Err(UnknownController {
                    name: name.to_string(),
                    known: known.join(","),
                });
            };
            set.insert(*k);
        }
        Ok(known
            .iter()
            .copied()
            .filter(|k| !off.contains(k) && (on.contains(k) || star))
            .collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stars_names_and_exclusions() {
        let known = ["a", "b", "c"];
        let cases: [(&str, &[&str]); 6] = [
            ("*", &["a", "b", "c"]),
            ("", &[]),
            ("a,c", &["a", "c"]),
            ("*,-b", &["a", "c"]),
            ("-b,*", &["a", "c"]),
            ("b,-b", &[]),
        ];
        for (list, want) in cases {
            let got: Vec<&str> = list
                .parse::<Selection>()
                .unwrap()
                .resolve(&known)
                .unwrap()
                .into_iter()
                .collect();
            assert_eq!(got, want, "{list:?}");
        }
        let err = "*,-x".parse::<Selection>().unwrap().resolve(&known);
        assert_eq!(
            err.unwrap_err().to_string(),
            "unknown controller \"x\" in --controllers; known: a,b,c"
        );
        assert_eq!(Selection::default().to_string(), "*");
    }
}
