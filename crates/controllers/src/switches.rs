//! rollwright's two switches on a DaemonSet's or StatefulSet's rolling update, beyond upstream:
//! in-place image updates (seed 004) and pausing. On rollwright's API server they are fields of
//! `spec.updateStrategy.rollingUpdate` (`podUpdatePolicy`, `paused`); a real cluster's API lacks
//! them, so there the same switches are annotations. Either place turns a switch on.

use serde_json::Value;

/// `InPlaceIfPossible` here (or in `spec.updateStrategy.rollingUpdate.podUpdatePolicy`) lets a
/// rolling update that changes only images patch pods instead of recreating them.
pub const POD_UPDATE_POLICY: &str = "rollwright.io/pod-update-policy";

/// `"true"` here (or `spec.updateStrategy.rollingUpdate.paused: true`) pauses a rolling update:
/// no pod of an old revision is replaced, while missing pods are still created and the status
/// stays true.
pub const PAUSED: &str = "rollwright.io/paused";

/// The switches of one DaemonSet or StatefulSet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switches {
    /// Image-only updates patch pods in place.
    pub in_place: bool,
    /// The rolling update is paused.
    pub paused: bool,
}

impl Switches {
    /// Reads them from the object's JSON. rollwright's API server defaults `podUpdatePolicy` to
    /// `Recreate`, so the field saying `Recreate` does not overrule the annotation.
    pub fn read(object: &Value) -> Self {
        let rolling = object.pointer("/spec/updateStrategy/rollingUpdate");
        let annotation = |name: &str| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
        };
        let policy = rolling
            .and_then(|r| r.get("podUpdatePolicy"))
            .and_then(Value::as_str);
        let paused = rolling
            .and_then(|r| r.get("paused"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Self {
            in_place: [policy, annotation(POD_UPDATE_POLICY)].contains(&Some("InPlaceIfPossible")),
            paused: paused || annotation(PAUSED) == Some("true"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn either_the_field_or_the_annotation_turns_a_switch_on() {
        let cases = [
            (json!({}), json!({}), (false, false)),
            (
                json!({"podUpdatePolicy": "InPlaceIfPossible", "paused": true}),
                json!({}),
                (true, true),
            ),
            (
                json!({"podUpdatePolicy": "Recreate", "paused": false}),
                json!({POD_UPDATE_POLICY: "InPlaceIfPossible", PAUSED: "true"}),
                (true, true),
            ),
            (
                json!({"podUpdatePolicy": "Recreate"}),
                json!({POD_UPDATE_POLICY: "Recreate", PAUSED: "false"}),
                (false, false),
            ),
        ];
        for (rolling, annotations, (in_place, paused)) in cases {
            let object = json!({"metadata": {"annotations": annotations},
                                "spec": {"updateStrategy": {"rollingUpdate": rolling}}});
            assert_eq!(
                Switches::read(&object),
                Switches { in_place, paused },
                "{object}"
            );
        }
    }
}
