use super::*;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, PodStatus,
};

fn rev(number: i64, hash: &str, live: i32) -> Revision {
    Revision {
        number,
        hash: hash.into(),
        live,
        completed: false,
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn deadline_at(t: &str) -> Cond {
    Cond {
        status: "False".into(),
        reason: "ProgressDeadlineExceeded".into(),
        updated: Some(ts(t)),
        transitioned: Some(ts(t)),
    }
}

/// v1 (`aaa`, 3 pods serving) then v2 (`bbb`, the current one) whose rollout failed its
/// deadline.
fn failed_rollout() -> Facts {
    Facts {
        enabled: true,
        observed: true,
        progressing: Some(deadline_at("2026-11-27T10:00:00Z")),
        current: Some(rev(2, "bbb", 0)),
        old: vec![rev(1, "aaa", 3)],
        threshold: 1,
        ..Default::default()
    }
}

fn rolled_back_to(d: &Decision) -> Option<(Reason, i64)> {
    match d {
        Decision::RollBack { reason, to, .. } => Some((*reason, to.number)),
        _ => None,
    }
}

#[test]
fn a_deadline_rolls_back_to_the_revision_still_serving() {
    let d = decide(&failed_rollout());
    assert_eq!(
        rolled_back_to(&d),
        Some((Reason::ProgressDeadlineExceeded, 1))
    );
    let Decision::RollBack { message, .. } = d else {
        unreachable!()
    };
    assert_eq!(
        message,
        "rolled back from revision 2 (bbb) to revision 1 (aaa): the rollout exceeded its \
         progress deadline"
    );
}

#[test]
fn nothing_without_opt_in_when_paused_or_before_the_status_is_current() {
    for change in [
        |f: &mut Facts| f.enabled = false,
        |f: &mut Facts| f.paused = true,
        |f: &mut Facts| f.observed = false,
        |f: &mut Facts| f.current = None,
        |f: &mut Facts| f.old.clear(),
        |f: &mut Facts| f.progressing.as_mut().unwrap().status = "True".into(),
        |f: &mut Facts| f.progressing.as_mut().unwrap().reason = "ReplicaSetUpdated".into(),
    ] {
        let mut f = failed_rollout();
        change(&mut f);
        assert_eq!(decide(&f), Decision::Nothing, "{f:?}");
    }
}

#[test]
fn failing_pods_count_from_max_1_max_unavailable() {
    // (image failures, crash loops, maxUnavailable, expected)
    let cases = [
        (1, 0, 0, Some(Reason::ImagePullFailure)), // max(1, 0) = 1
        (1, 0, 1, Some(Reason::ImagePullFailure)),
        (1, 0, 2, None),
        (2, 0, 2, Some(Reason::ImagePullFailure)),
        (0, 1, 2, None),
        (0, 2, 2, Some(Reason::CrashLoop)),
        (1, 2, 3, Some(Reason::CrashLoop)),
        (2, 1, 3, Some(Reason::ImagePullFailure)),
        (0, 0, 1, None),
    ];
    for (image, crash, max_unavailable, want) in cases {
        let mut f = failed_rollout();
        f.progressing = None;
        f.image_failures = image;
        f.crash_loops = crash;
        f.threshold = max_unavailable;
        assert_eq!(
            rolled_back_to(&decide(&f)).map(|(r, _)| r),
            want,
            "{image} {crash} {max_unavailable}"
        );
    }
}

#[test]
fn the_target_is_completed_then_serving_then_newest_and_never_the_failed_one() {
    let mut f = failed_rollout();
    f.current = Some(rev(5, "eee", 0));
    f.old = vec![
        rev(1, "aaa", 0),
        rev(2, "bbb", 2),
        rev(3, "ccc", 0),
        rev(4, "ddd", 0),
    ];
    assert_eq!(rolled_back_to(&decide(&f)).map(|(_, n)| n), Some(2));
    f.old[0].completed = true;
    assert_eq!(rolled_back_to(&decide(&f)).map(|(_, n)| n), Some(1));
    f.old[0].completed = false;
    f.old[1].live = 0;
    assert_eq!(rolled_back_to(&decide(&f)).map(|(_, n)| n), Some(4));
    // The template rolled back from before is no target.
    f.marks.from = Some("ddd".into());
    assert_eq!(rolled_back_to(&decide(&f)).map(|(_, n)| n), Some(3));
}

#[test]
fn a_template_rolled_back_from_is_not_rolled_back_from_again() {
    let mut f = failed_rollout();
    f.marks = Marks {
        from: Some("bbb".into()),
        to: Some("aaa".into()),
        at: Some(ts("2026-11-27T09:00:00Z")),
    };
    let d = decide(&f);
    assert!(matches!(d, Decision::Suppressed { .. }), "{d:?}");
    // Said once: the condition holds it.
    f.rolled_back = Some(Cond {
        status: "False".into(),
        reason: SUPPRESSED.into(),
        ..Default::default()
    });
    assert_eq!(decide(&f), Decision::Nothing);
}

#[test]
fn a_rollback_that_fails_stops_and_says_so() {
    // Rolled back from bbb to aaa at 10:00; aaa is current again and fails.
    let mut f = failed_rollout();
    f.current = Some(rev(3, "aaa", 0));
    f.old = vec![rev(2, "bbb", 0), rev(0, "zzz", 1)];
    f.marks = Marks {
        from: Some("bbb".into()),
        to: Some("aaa".into()),
        at: Some(ts("2026-11-27T10:00:00Z")),
    };
    // The deadline condition is the failed rollout's own, not newer than the rollback: nothing.
    f.progressing = Some(deadline_at("2026-11-27T10:00:00Z"));
    assert_eq!(decide(&f), Decision::Nothing);
    // A deadline reached after the rollback: the rollback failed; no second rollback (to zzz,
    // which still serves a pod).
    f.progressing = Some(deadline_at("2026-11-27T10:01:00Z"));
    let d = decide(&f);
    assert!(matches!(d, Decision::RollbackFailed { .. }), "{d:?}");
    // Failing pods of the restored revision say the same.
    f.progressing = None;
    f.crash_loops = 1;
    let d = decide(&f);
    assert!(
        matches!(
            d,
            Decision::RollbackFailed {
                reason: Reason::CrashLoop,
                ..
            }
        ),
        "{d:?}"
    );
    f.rolled_back = Some(Cond {
        status: "False".into(),
        reason: FAILED.into(),
        ..Default::default()
    });
    assert_eq!(decide(&f), Decision::Nothing);
}

#[test]
fn never_a_loop_between_two_bad_revisions() {
    // Simulate: each rollback's record as the write leaves it, the restored revision failing.
    let mut f = failed_rollout();
    let mut rollbacks = 0;
    for step in 0..10 {
        match decide(&f) {
            Decision::RollBack { from, to, .. } => {
                rollbacks += 1;
                f.marks = Marks {
                    from: Some(from.hash.clone()),
                    to: Some(to.hash.clone()),
                    at: Some(ts("2026-11-27T10:00:00Z")),
                };
                let mut restored = to.clone();
                restored.number = 3 + step;
                f.old = vec![from];
                f.current = Some(restored);
                // The restored revision fails its own deadline later.
                f.progressing = Some(deadline_at("2026-11-27T10:05:00Z"));
            }
            Decision::RollbackFailed { .. } => {
                f.rolled_back = Some(Cond {
                    status: "False".into(),
                    reason: FAILED.into(),
                    ..Default::default()
                });
            }
            Decision::Nothing => break,
            d => panic!("{d:?}"),
        }
    }
    assert_eq!(rollbacks, 1);
}

#[test]
fn a_rollback_without_its_condition_is_recorded_after_a_restart() {
    let marks = Marks {
        at: Some(ts("2026-11-27T10:00:00Z")),
        ..Default::default()
    };
    assert!(!needs_record(&Marks::default(), None));
    assert!(needs_record(&marks, None));
    let cond = |t: &str| Cond {
        transitioned: Some(ts(t)),
        ..Default::default()
    };
    assert!(needs_record(&marks, Some(&cond("2026-11-27T09:59:59Z"))));
    assert!(!needs_record(&marks, Some(&cond("2026-11-27T10:00:00Z"))));
    assert!(!needs_record(&marks, Some(&cond("2026-11-27T10:00:01Z"))));
}

fn pod(statuses: &[(&str, i32)], init: bool) -> Pod {
    let statuses: Vec<ContainerStatus> = statuses
        .iter()
        .map(|(reason, restarts)| ContainerStatus {
            name: "c".into(),
            restart_count: *restarts,
            state: Some(ContainerState {
                waiting: (!reason.is_empty()).then(|| ContainerStateWaiting {
                    reason: Some(reason.to_string()),
                    message: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    Pod {
        status: Some(PodStatus {
            container_statuses: (!init).then(|| statuses.clone()),
            init_container_statuses: init.then_some(statuses),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// (container statuses as (waiting reason, restarts), init containers?, expected)
type PodCase = (&'static [(&'static str, i32)], bool, Option<PodFailure>);

#[test]
fn which_pod_failures_count() {
    let cases: Vec<PodCase> = vec![
        (&[("ErrImagePull", 0)], false, Some(PodFailure::ImagePull)),
        (
            &[("ImagePullBackOff", 0)],
            false,
            Some(PodFailure::ImagePull),
        ),
        (
            &[("InvalidImageName", 0)],
            false,
            Some(PodFailure::ImagePull),
        ),
        (
            &[("ImagePullBackOff", 0)],
            true,
            Some(PodFailure::ImagePull),
        ),
        (
            &[("", 0), ("ErrImagePull", 0)],
            false,
            Some(PodFailure::ImagePull),
        ),
        (
            &[("CrashLoopBackOff", 3)],
            false,
            Some(PodFailure::CrashLoop),
        ),
        (&[("CrashLoopBackOff", 2)], false, None),
        (
            &[("CrashLoopBackOff", 9)],
            true,
            Some(PodFailure::CrashLoop),
        ),
        // Waiting that heals by waiting.
        (&[("ContainerCreating", 0)], false, None),
        (&[("PodInitializing", 0)], false, None),
        (&[("", 7)], false, None),
    ];
    for (statuses, init, want) in cases {
        assert_eq!(pod_failure(&pod(statuses, init), 3), want, "{statuses:?}");
    }
    assert_eq!(pod_failure(&Pod::default(), 3), None);
}

#[test]
fn settings_are_read_from_annotations() {
    let a = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(crash_restarts(None), DEFAULT_CRASH_RESTARTS);
    assert_eq!(crash_restarts(Some(&a(&[(CRASH_RESTARTS, "5")]))), 5);
    assert_eq!(
        crash_restarts(Some(&a(&[(CRASH_RESTARTS, "x")]))),
        DEFAULT_CRASH_RESTARTS
    );
    assert_eq!(
        crash_restarts(Some(&a(&[(CRASH_RESTARTS, "0")]))),
        DEFAULT_CRASH_RESTARTS
    );
    assert!(opted_in(Some(&a(&[(ENABLED, "true")]))));
    assert!(opted_in(Some(&a(&[(ENABLED, "True")]))));
    assert!(!opted_in(Some(&a(&[(ENABLED, "false")]))));
    assert!(!opted_in(None));
    let m = Marks::read(Some(&a(&[
        (ROLLED_BACK_FROM, "b"),
        (ROLLED_BACK_AT, "2026-11-27T10:00:00Z"),
    ])));
    assert_eq!(m.from.as_deref(), Some("b"));
    assert_eq!(m.at, Some(ts("2026-11-27T10:00:00Z")));
}
