//! The controllers' pace found by replaying the last update the snapshot holds, where its
//! timestamps could not show it.
//!
//! Timestamps kept to the second show a client's limit only in a rollout it paces for several
//! seconds ([`crate::cli::snapshot::pace`]). A rollout of 40 pods fits in one burst; a DaemonSet
//! that readiness paces creates 10 pods every second and a half: both look the same under
//! kube-controller-manager's 20 requests a second as under no limit, but take twice as long
//! under it. The snapshot then assumes upstream's default, which made a 3 s rollout on a
//! cluster without that limit rehearse as 7.7 s (issue 39).
//!
//! The history cannot always be trusted where it does show a pace, either: a DaemonSet whose
//! `maxUnavailable` lets 10 pods at a time through, each Ready 1.5 s after it starts, creates
//! about 6 pods every second, as steadily as a limiter would; read as a limit of 12 requests a
//! second, it rehearsed 24 s against 18 s real.
//!
//! What the history does keep is how long that last update took. Rehearsing it again (a
//! `rollout restart` of the same workload makes the same pods anew, at the same readiness) under
//! what the snapshot read, under upstream's default and under no limit takes a few short runs on
//! the rehearsal's clock; the one that comes closest to the recorded duration is the control
//! plane the cluster runs. Closest is by ratio (a second matters more in a 3 s rollout than in a
//! 50 s one). The recorded figure is off by up to a second either way, so a candidate within
//! [`TOLERANCE`] of the closest counts as close, and the first such in the order above wins:
//! the snapshot's reading unless the replay refutes it, then upstream's default.

use super::{Limits, change::Change, on_accelerated_clock, pace};
use crate::cli::snapshot::Snapshot;
use restclient::Limit;

/// How much further from the recorded duration than the closest replay a candidate may come
/// and still count as close: 5%, by ratio (the replays of two limits a rollout never reaches
/// differ by about that much).
const TOLERANCE: f64 = 0.05;

/// `rates` with the controllers' limit corrected by replaying the snapshot's last update, when
/// the snapshot holds one and the limit was read from the snapshot (not given); otherwise
/// `rates` as they are. `profile` is the first run's timing.
pub fn calibrate(
    snapshot: &Snapshot,
    profile: &serde_json::Value,
    limits: Limits,
    rates: pace::Rates,
) -> anyhow::Result<pace::Rates> {
    let controllers = pace::Component::Controllers;
    if !rates.read_from_snapshot(controllers) {
        return Ok(rates);
    }
    let Some(recorded) = crate::cli::snapshot::pace::last_update(&snapshot.objects) else {
        return Ok(rates);
    };
    let replay = Change::parse(&recorded.replay())?;
    let limits = Limits {
        accelerated: true,
        ..limits
    };
    eprintln!(
        "calibrating on {}'s last update ({} pods, {:.0} s recorded):",
        recorded.workload, recorded.pods, recorded.seconds
    );
    let read = rates.limit(controllers);
    let mut candidates: Vec<Option<Limit>> = vec![read];
    for limit in [Some(controllers.default_limit()), None] {
        if !candidates.contains(&limit) {
            candidates.push(limit);
        }
    }
    let mut tried = Vec::new();
    for limit in candidates {
        let run = on_accelerated_clock(
            snapshot,
            std::slice::from_ref(&replay),
            profile,
            1,
            limits,
            &rates.with(controllers, limit),
        )?;
        if !run.outcome.finished {
            eprintln!("  the replay did not finish: the snapshot's reading stands");
            return Ok(rates);
        }
        eprintln!("  {}: {:.1} s", named(limit), run.outcome.seconds);
        tried.push((limit, run.outcome.seconds));
    }
    let chosen = choose(recorded.seconds, &tried);
    let replays: Vec<String> = tried
        .iter()
        .map(|(limit, took)| format!("{took:.1} s {}", named(*limit)))
        .collect();
    let replayed = format!(
        "replaying {}'s last update ({} pods, {:.0} s recorded) took {}",
        recorded.workload,
        recorded.pods,
        recorded.seconds,
        replays.join(", ")
    );
    Ok(if chosen == read {
        rates.confirmed(controllers, &replayed)
    } else {
        rates.calibrated(controllers, chosen, replayed)
    })
}

/// A candidate, for sentences: "at 20/30", "unpaced".
fn named(limit: Option<Limit>) -> String {
    match limit {
        Some(l) => format!("at {}/{}", l.qps, l.burst),
        None => "unpaced".into(),
    }
}

/// Of the candidates `tried` (each limit with its replay's seconds, in order of preference), the
/// first that comes within [`TOLERANCE`] of the closest to `recorded` seconds, by ratio.
fn choose(recorded: f64, tried: &[(Option<Limit>, f64)]) -> Option<Limit> {
    // A rollout recorded within one second reads as 0 s: half a second is its middle.
    let seen = recorded.max(0.5);
    let miss = |took: f64| (seen / took.max(0.001)).ln().abs();
    let closest = tried
        .iter()
        .map(|(_, took)| miss(*took))
        .fold(f64::INFINITY, f64::min);
    tried
        .iter()
        .find(|(_, took)| miss(*took) <= closest + (1.0 + TOLERANCE).ln())
        .and_then(|(limit, _)| *limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Option<Limit> = Some(Limit::CONTROLLER_MANAGER);
    const MEASURED: Option<Limit> = Some(Limit {
        qps: 12.0,
        burst: 30,
    });

    #[test]
    fn the_replay_closest_to_the_recorded_update_decides() {
        // Issue 39's 40 replicas: 3 s on a cluster without the limit, 7 s with it.
        let tried = [(DEFAULT, 7.7), (None, 3.2)];
        assert_eq!(choose(3.0, &tried), None);
        assert_eq!(choose(7.0, &tried), DEFAULT);
        // By ratio: the middle of 3.2 s and 7.7 s is 4.96 s.
        assert_eq!(choose(4.8, &tried), None);
        assert_eq!(choose(5.2, &tried), DEFAULT);
        assert_eq!(choose(6.0, &tried), DEFAULT);
        // Recorded within one second.
        assert_eq!(choose(0.0, &[(DEFAULT, 2.5), (None, 1.2)]), None);
    }

    #[test]
    fn the_snapshots_reading_stands_unless_its_replay_is_refuted() {
        // A DaemonSet paced by readiness, read as 12/s: 24 s replayed against 18 s recorded.
        let tried = [(MEASURED, 24.2), (DEFAULT, 19.4), (None, 17.0)];
        assert_eq!(choose(18.0, &tried), DEFAULT);
        assert_eq!(choose(16.0, &tried), None);
        assert_eq!(choose(23.0, &tried), MEASURED);
        // Replays that cannot be told apart keep the first.
        assert_eq!(choose(16.0, &[(DEFAULT, 16.5), (None, 16.0)]), DEFAULT);
    }
}
