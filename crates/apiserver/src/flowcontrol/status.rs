//! The FlowSchemas' status: upstream's controller keeps a `Dangling` condition on each, saying
//! whether the priority level it names exists (kubectl's MissingPL column).

use serde_json::{Value, json};

/// The `Dangling` condition of FlowSchemas whose condition is missing or out of date, by name.
pub(super) fn dangling_updates(flow_schemas: &[Value], levels: &[Value]) -> Vec<(String, Value)> {
    let exists = |name: &str| {
        levels
            .iter()
            .any(|l| l.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
    };
    flow_schemas
        .iter()
        .filter_map(|fs| {
            let name = fs.pointer("/metadata/name")?.as_str()?;
            let level = fs
                .pointer("/spec/priorityLevelConfiguration/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (status, reason, message) = if exists(level) {
                (
                    "False",
                    "Found",
                    format!(
                        "This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"
                    ),
                )
            } else {
                (
                    "True",
                    "NotFound",
                    format!(
                        "This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"
                    ),
                )
            };
            let current = fs
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"));
            let up_to_date = current.is_some_and(|c| {
                c["status"] == status && c["reason"] == reason && c["message"] == message.as_str()
            });
            (!up_to_date).then(|| {
                (
                    name.to_string(),
                    json!({"type": "Dangling", "status": status,
                        "lastTransitionTime": crate::object::now_rfc3339(),
                        "reason": reason, "message": message}),
                )
            })
        })
        .collect()
}

/// Puts `condition` in place of the object's condition of its type.
pub(super) fn set_condition(obj: &mut Value, condition: Value) {
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != condition["type"])
        .collect();
    conditions.push(condition);
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    obj["status"]["conditions"] = Value::Array(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_naming_a_missing_level_is_dangling_and_one_up_to_date_is_left_alone() {
        let levels = [json!({"metadata": {"name": "exempt"}})];
        let mut found = json!({"metadata": {"name": "a"},
            "spec": {"priorityLevelConfiguration": {"name": "exempt"}}});
        let missing = json!({"metadata": {"name": "b"},
            "spec": {"priorityLevelConfiguration": {"name": "gone"}}});
        let updates = dangling_updates(&[found.clone(), missing], &levels);
        assert_eq!(updates.len(), 2);
        assert_eq!(updates[0].1["status"], "False");
        assert_eq!(updates[1].1["status"], "True");
        assert_eq!(updates[1].1["reason"], "NotFound");
        set_condition(&mut found, updates[0].1.clone());
        assert!(dangling_updates(&[found], &levels).is_empty());
    }
}
