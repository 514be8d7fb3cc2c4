//! The progress deadline of a DaemonSet or StatefulSet: upstream's API has no
//! `progressDeadlineSeconds` for them, so it is an annotation, which `kubectl` and a real
//! cluster's API server accept unchanged.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::time::Duration;

/// Seconds a rollout may go without progress before it is `ProgressDeadlineExceeded`.
pub const ANNOTATION: &str = "rollwright.io/progress-deadline-seconds";

/// The annotation holds something other than a positive whole number of seconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ignoring annotation {ANNOTATION}={value:?}: the progress deadline must be a positive whole number of seconds"
)]
pub struct Invalid {
    /// What the annotation says.
    pub value: String,
}

/// The deadline the annotation sets, `None` without one. Bounded as `progressDeadlineSeconds`
/// (a positive `int32`).
pub fn of(meta: &ObjectMeta) -> Result<Option<Duration>, Invalid> {
    let Some(value) = meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION)) else {
        return Ok(None);
    };
    match value.trim().parse::<i32>() {
        Ok(seconds) if seconds > 0 => Ok(Some(Duration::from_secs(seconds.unsigned_abs().into()))),
        _ => Err(Invalid {
            value: value.clone(),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meta(value: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: value.map(|v| [(ANNOTATION.to_string(), v.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_positive_integer_or_nothing() {
        assert_eq!(of(&meta(None)), Ok(None));
        assert_eq!(of(&meta(Some("10"))), Ok(Some(Duration::from_secs(10))));
        for bad in ["0", "-5", "ten", "1.5", "", "99999999999"] {
            let err = of(&meta(Some(bad))).unwrap_err();
            assert_eq!(err.value, bad);
            assert!(
                err.to_string()
                    .starts_with(&format!("ignoring annotation {ANNOTATION}={bad:?}"))
            );
        }
    }
}
