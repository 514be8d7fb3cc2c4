//! StorageClasses as the volume controller reads them: which one is the default, how its
//! volumes bind, and who provisions them.

use k8s_openapi::api::storage::v1::StorageClass;

/// The annotation that makes a class the default for claims that name none.
pub const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// Its beta spelling, still honoured upstream.
pub const IS_DEFAULT_CLASS_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The provisioner rollwright simulates: a volume per claim, pinned to the consumer's node.
pub const SIMULATED_PROVISIONER: &str = "rollwright.io/simulated";

/// Whether the class is marked default.
pub fn is_default(class: &StorageClass) -> bool {
    class.metadata.annotations.as_ref().is_some_and(|a| {
        [IS_DEFAULT_CLASS, IS_DEFAULT_CLASS_BETA]
            .iter()
            .any(|k| a.get(*k).is_some_and(|v| v == "true"))
    })
}

/// The default class among `classes`: of several marked default, the newest (then the first by
/// name), as upstream's `GetDefaultClass` since 1.26.
pub fn default_class<'a>(classes: impl IntoIterator<Item = &'a StorageClass>) -> Option<&'a str> {
    classes
        .into_iter()
        .filter(|c| is_default(c))
        .max_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        })
        .and_then(|c| c.metadata.name.as_deref())
}

/// Whether the class binds only once a pod using the claim is scheduled.
pub fn waits_for_first_consumer(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// The reclaim policy of the volumes the class provisions (upstream's default: Delete).
pub fn reclaim_policy(class: &StorageClass) -> &str {
    class.reclaim_policy.as_deref().unwrap_or("Delete")
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn class(name: &str, default: Option<&str>, created: i64) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: default.map(|k| [(k.to_string(), "true".to_string())].into()),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(created).unwrap())),
                ..Default::default()
            },
            provisioner: SIMULATED_PROVISIONER.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_newest_default_wins() {
        let cases: Vec<(Vec<StorageClass>, Option<&str>)> = vec![
            (vec![], None),
            (vec![class("a", None, 1)], None),
            (vec![class("a", Some(IS_DEFAULT_CLASS), 1)], Some("a")),
            (vec![class("a", Some(IS_DEFAULT_CLASS_BETA), 1)], Some("a")),
            (
                vec![
                    class("old", Some(IS_DEFAULT_CLASS), 1),
                    class("new", Some(IS_DEFAULT_CLASS), 2),
                    class("newer-but-not-default", None, 3),
                ],
                Some("new"),
            ),
            (
                vec![
                    class("b", Some(IS_DEFAULT_CLASS), 1),
                    class("a", Some(IS_DEFAULT_CLASS), 1),
                ],
                Some("a"),
            ),
        ];
        for (classes, want) in cases {
            assert_eq!(default_class(&classes), want);
        }
    }

    #[test]
    fn binding_mode_and_reclaim_policy() {
        let mut c = class("standard", None, 0);
        assert!(!waits_for_first_consumer(&c));
        assert_eq!(reclaim_policy(&c), "Delete");
        c.volume_binding_mode = Some("WaitForFirstConsumer".into());
        c.reclaim_policy = Some("Retain".into());
        assert!(waits_for_first_consumer(&c));
        assert_eq!(reclaim_policy(&c), "Retain");
    }
}
