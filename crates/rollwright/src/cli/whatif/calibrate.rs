//! The control plane's pace found by replaying the last update the snapshot holds, where its
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
//! the snapshot's reading unless the replay refutes it, then upstream's default. When none of
//! the three comes within 15%, a few more replays look between the two on either side (by
//! halving the gap between their rates), and the closest replay of all wins, since those rates
//! have no order of preference; this is for a control plane that no default describes: upstream
//! at raised limits makes a 500-pod update in 10 s, at its API server's pace, where rollwright's
//! own makes it in 4 s and 20/30 in 52 s. The scheduler's limit is checked the same way, after
//! the controllers'. A replay faster than the recorded update under every limit is a control
//! plane slower per request, which no rate limit makes: upstream's StatefulSet controller takes
//! about 1.9 s a pod through an `OrderedReady` update where rollwright's own takes 1.5 s. Then
//! each of the controllers' requests is made slower ([`restclient::delayed`]) by what brings the
//! replay closest.

use super::{Limits, change::Change, on_accelerated_clock, pace};
use crate::cli::snapshot::{Snapshot, pace::LastUpdate};
use restclient::Limit;
use std::time::Duration;

/// How much further from the recorded duration than the closest replay a candidate may come
/// and still count as close: 5%, by ratio (the replays of two limits a rollout never reaches
/// differ by about that much).
const TOLERANCE: f64 = 0.05;

/// Past how far from the recorded duration (by ratio) the closest candidate sends the replays
/// looking between the two candidates around it.
const FIT_BEYOND: f64 = 0.15;

/// Replays spent looking between two candidates: each halves the gap (by ratio) between them.
const FIT_STEPS: usize = 5;

/// How far above a limit the search for a faster one reaches when the faster candidate is no
/// limit at all.
const FIT_REACH: f32 = 64.0;

/// Where the search for a latency looks, when the replay is faster than the recorded update
/// under every limit: from 10 ms to 2.56 s more per request.
const LATENCY_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_millis(2560));

/// Replays spent on the latency: each halves the range (by ratio).
const LATENCY_STEPS: usize = 6;

/// `rates` with the controllers' and then the scheduler's limit corrected by replaying the
/// snapshot's last update, each when the snapshot holds one and the limit was read from the
/// snapshot (not given); otherwise `rates` as they are. `profile` is the first run's timing.
pub fn calibrate(
    snapshot: &Snapshot,
    profile: &serde_json::Value,
    limits: Limits,
    rates: pace::Rates,
) -> anyhow::Result<pace::Rates> {
    let components = [pace::Component::Controllers, pace::Component::Scheduler];
    if !components.iter().any(|c| rates.read_from_snapshot(*c)) {
        return Ok(rates);
    }
    let Some(recorded) = crate::cli::snapshot::pace::last_update(&snapshot.objects) else {
        return Ok(rates);
    };
    eprintln!(
        "calibrating on {}'s last update ({} pods, {:.0} s recorded):",
        recorded.workload, recorded.pods, recorded.seconds
    );
    let replay = Replay {
        snapshot,
        profile,
        limits: Limits {
            accelerated: true,
            ..limits
        },
        change: Change::parse(&recorded.replay())?,
    };
    let mut rates = rates;
    let mut took = None;
    for component in components {
        if rates.read_from_snapshot(component) {
            (rates, took) = calibrate_one(&replay, &recorded, rates, component, took)?;
        }
    }
    // Slower than any limit makes it, by more than the fit's margin: each request is.
    let controllers = pace::Component::Controllers;
    if let Some(took) = took
        && took < recorded.seconds
        && miss(recorded.seconds, took) > FIT_BEYOND.ln_1p()
        && rates.read_from_snapshot(controllers)
    {
        rates = calibrate_latency(&replay, &recorded, rates, controllers, took)?;
    }
    Ok(rates)
}

/// `rates` with each of `component`'s requests slower by what makes the replay come closest to
/// `recorded`, searched (by halving the gap, by ratio) between [`LATENCY_RANGE`]'s ends; as they
/// are if none comes closer than `took`, the replay without it.
fn calibrate_latency(
    replay: &impl Rehearsal,
    recorded: &LastUpdate,
    rates: pace::Rates,
    component: pace::Component,
    took: f64,
) -> anyhow::Result<pace::Rates> {
    let (mut fast, mut slow) = LATENCY_RANGE;
    let mut tried: Vec<(Duration, f64)> = vec![(Duration::ZERO, took)];
    for _ in 0..LATENCY_STEPS {
        let latency = Duration::from_millis(
            (fast.as_millis() as f64 * slow.as_millis() as f64).sqrt() as u64,
        );
        let Some(seconds) = replay.under(&rates.slowed(component, latency, None))? else {
            break;
        };
        eprintln!(
            "  {} {} ms slower: {seconds:.1} s",
            component.name(),
            latency.as_millis()
        );
        tried.push((latency, seconds));
        if seconds > recorded.seconds {
            slow = latency;
        } else {
            fast = latency;
        }
    }
    let Some(&(latency, _)) = tried
        .iter()
        .min_by(|a, b| miss(recorded.seconds, a.1).total_cmp(&miss(recorded.seconds, b.1)))
    else {
        return Ok(rates);
    };
    if latency.is_zero() {
        return Ok(rates);
    }
    let replays: Vec<String> = tried
        .iter()
        .map(|(l, seconds)| match l.as_millis() {
            0 => format!("{seconds:.1} s as fast as its own"),
            ms => format!("{seconds:.1} s {ms} ms slower"),
        })
        .collect();
    let why = format!(
        "replaying {}'s last update ({} pods, {:.0} s recorded) took {}",
        recorded.workload,
        recorded.pods,
        recorded.seconds,
        replays.join(", ")
    );
    Ok(rates.slowed(component, latency, Some(&why)))
}

/// The last update, replayed on the rehearsal's clock.
struct Replay<'a> {
    snapshot: &'a Snapshot,
    profile: &'a serde_json::Value,
    limits: Limits,
    change: Change,
}

/// What the search replays the update on: a rehearsal, or in tests a model of one.
trait Rehearsal {
    /// Seconds the update takes under `rates`; none if it did not finish.
    fn under(&self, rates: &pace::Rates) -> anyhow::Result<Option<f64>>;
}

impl Rehearsal for Replay<'_> {
    fn under(&self, rates: &pace::Rates) -> anyhow::Result<Option<f64>> {
        let run = on_accelerated_clock(
            self.snapshot,
            std::slice::from_ref(&self.change),
            self.profile,
            1,
            self.limits,
            rates,
        )?;
        Ok(run.outcome.finished.then_some(run.outcome.seconds))
    }
}

/// `rates` with `component`'s limit the one whose replay comes closest to `recorded`: what the
/// snapshot read, upstream's default or none, or, when none of those comes within
/// [`FIT_BEYOND`], one between the two around it; with the seconds its replay took (none if a
/// replay did not finish, and `rates` are as they were). `known` is what `rates` themselves
/// already took (the previous component's choice), which is not replayed again.
fn calibrate_one(
    replay: &impl Rehearsal,
    recorded: &LastUpdate,
    rates: pace::Rates,
    component: pace::Component,
    known: Option<f64>,
) -> anyhow::Result<(pace::Rates, Option<f64>)> {
    let read = rates.limit(component);
    let mut candidates: Vec<Option<Limit>> = vec![read];
    for limit in [Some(component.default_limit()), None] {
        if !candidates.contains(&limit) {
            candidates.push(limit);
        }
    }
    let mut tried: Vec<(Option<Limit>, f64)> = known.map(|k| (read, k)).into_iter().collect();
    let try_limit = |limit: Option<Limit>, tried: &mut Vec<(Option<Limit>, f64)>| {
        let took = replay.under(&rates.with(component, limit))?;
        match took {
            Some(seconds) => {
                eprintln!("  {} {}: {seconds:.1} s", component.name(), named(limit));
                tried.push((limit, seconds));
            }
            None => eprintln!(
                "  {} {}: the replay did not finish",
                component.name(),
                named(limit)
            ),
        }
        anyhow::Ok(took.is_some())
    };
    for limit in candidates.into_iter().skip(tried.len()) {
        if !try_limit(limit, &mut tried)? {
            return Ok((rates, None));
        }
    }
    let bases = tried.len();
    if miss(recorded.seconds, closest(recorded.seconds, &tried)) > FIT_BEYOND.ln_1p()
        && let Some((mut slow, mut fast)) = around(recorded.seconds, &tried)
    {
        for _ in 0..FIT_STEPS {
            let qps = (slow.qps * fast).sqrt().round();
            if qps <= slow.qps || qps >= fast {
                break;
            }
            let limit = Limit { qps, ..slow };
            if !try_limit(Some(limit), &mut tried)? {
                break;
            }
            match tried.last() {
                Some((_, took)) if *took > recorded.seconds => slow = limit,
                _ => fast = qps,
            }
        }
    }
    let chosen = if tried.len() > bases {
        // The search's rates have no order of preference: the closest wins.
        nearest(recorded.seconds, &tried)
    } else {
        choose(recorded.seconds, &tried)
    };
    let took = tried
        .iter()
        .find(|(limit, _)| *limit == chosen)
        .map(|(_, seconds)| *seconds);
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
    let rates = if chosen == read {
        rates.confirmed(component, &replayed)
    } else {
        rates.calibrated(component, chosen, replayed)
    };
    Ok((rates, took))
}

/// The candidates on either side of `recorded` seconds, as the slower one's limit and the
/// faster one's rate (a rate [`FIT_REACH`] times the slower's for no limit); none when every
/// candidate is faster, or every one slower.
fn around(recorded: f64, tried: &[(Option<Limit>, f64)]) -> Option<(Limit, f32)> {
    let slow = tried
        .iter()
        .filter(|(limit, took)| limit.is_some() && *took > recorded)
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let fast = tried
        .iter()
        .filter(|(_, took)| *took <= recorded)
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let slow = slow.0?;
    let fast = fast.0.map_or(slow.qps * FIT_REACH, |l| l.qps);
    (fast > slow.qps).then_some((slow, fast))
}

/// A candidate, for sentences: "at 20/30", "unpaced".
fn named(limit: Option<Limit>) -> String {
    match limit {
        Some(l) => format!("at {}/{}", l.qps, l.burst),
        None => "unpaced".into(),
    }
}

/// How far `took` seconds is from `recorded`, by ratio. A rollout recorded within one second
/// reads as 0 s: half a second is its middle.
fn miss(recorded: f64, took: f64) -> f64 {
    (recorded.max(0.5) / took.max(0.001)).ln().abs()
}

/// The candidate in `tried` whose replay came closest to `recorded`, with its seconds.
fn closest_of(recorded: f64, tried: &[(Option<Limit>, f64)]) -> Option<(Option<Limit>, f64)> {
    tried
        .iter()
        .copied()
        .min_by(|a, b| miss(recorded, a.1).total_cmp(&miss(recorded, b.1)))
}

/// The seconds of the candidate in `tried` closest to `recorded`.
fn closest(recorded: f64, tried: &[(Option<Limit>, f64)]) -> f64 {
    closest_of(recorded, tried).map_or(recorded, |(_, took)| took)
}

/// The limit of the candidate in `tried` closest to `recorded`.
fn nearest(recorded: f64, tried: &[(Option<Limit>, f64)]) -> Option<Limit> {
    closest_of(recorded, tried).and_then(|(limit, _)| limit)
}

/// Of the candidates `tried` (each limit with its replay's seconds, in order of preference), the
/// first that comes within [`TOLERANCE`] of the closest to `recorded` seconds, by ratio.
fn choose(recorded: f64, tried: &[(Option<Limit>, f64)]) -> Option<Limit> {
    let best = miss(recorded, closest(recorded, tried));
    tried
        .iter()
        .find(|(_, took)| miss(recorded, *took) <= best + TOLERANCE.ln_1p())
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

    #[test]
    fn a_fit_looks_between_the_candidates_on_either_side() {
        // Upstream at raised limits: 10 s, between 12.1 s at the scheduler's 50/100 and 4 s
        // with no limit: up to 64 times the slower rate.
        let scheduler = Some(Limit::SCHEDULER);
        assert_eq!(
            around(10.0, &[(scheduler, 12.1), (None, 4.0)]),
            Some((Limit::SCHEDULER, 50.0 * FIT_REACH))
        );
        // The nearest on each side.
        let fast = Limit {
            qps: 100.0,
            burst: 30,
        };
        assert_eq!(
            around(
                30.0,
                &[
                    (MEASURED, 60.0),
                    (DEFAULT, 40.0),
                    (Some(fast), 20.0),
                    (None, 12.0)
                ]
            ),
            Some((Limit::CONTROLLER_MANAGER, 100.0))
        );
        // Faster than every candidate, or slower: nothing to look between.
        assert_eq!(around(3.0, &[(DEFAULT, 52.4), (None, 12.1)]), None);
        assert_eq!(around(60.0, &[(DEFAULT, 52.4), (None, 12.1)]), None);
    }

    #[test]
    fn after_a_search_the_closest_replay_wins() {
        // Upstream at raised limits, 2,000 pods, 21 s recorded: the search's 207/s replayed in
        // 19.6 s and 182/s in 22.3 s. Both are within 5% of each other; the nearer is 182/s.
        let rate = |qps: f32| {
            Some(Limit {
                qps,
                ..Limit::CONTROLLER_MANAGER
            })
        };
        let model = Model(|qps, _| match qps {
            None => 6.0,
            Some(q) if q <= 50.0 => 80.0,
            Some(q) if q < 190.0 => 22.3,
            Some(_) => 19.6,
        });
        let (rates, took) = calibrate_scheduler(&model, 21.0);
        assert_eq!(took, Some(22.3));
        let chosen = rates.limit(pace::Component::Scheduler);
        assert!(chosen.is_some_and(|l| l.qps < 190.0), "{chosen:?}");
        // Among the three base candidates, order still wins within the tolerance.
        assert_eq!(
            choose(21.0, &[(rate(207.0), 19.6), (rate(182.0), 22.3)]),
            rate(207.0)
        );
    }

    /// A model of a replay: seconds from the scheduler's rate and the controllers' latency.
    struct Model(fn(Option<f32>, f64) -> f64);

    impl Rehearsal for Model {
        fn under(&self, rates: &pace::Rates) -> anyhow::Result<Option<f64>> {
            let qps = rates.limit(pace::Component::Scheduler).map(|l| l.qps);
            let latency = rates
                .latency(pace::Component::Controllers)
                .map_or(0.0, |l| l.as_secs_f64());
            Ok(Some((self.0)(qps, latency)))
        }
    }

    fn measured_rates() -> pace::Rates {
        let pace = crate::cli::snapshot::pace::measure(&Default::default());
        pace::Rates::resolve(None, Some(&pace))
    }

    /// The scheduler calibrated on `model` against an update recorded as `seconds` long.
    fn calibrate_scheduler(model: &Model, seconds: f64) -> (pace::Rates, Option<f64>) {
        calibrate_one(
            model,
            &update(seconds),
            measured_rates(),
            pace::Component::Scheduler,
            None,
        )
        .expect("replays")
    }

    fn update(seconds: f64) -> LastUpdate {
        LastUpdate {
            workload: "deployment/shop/web".into(),
            pods: 500,
            seconds,
        }
    }

    #[test]
    fn the_search_finds_the_rate_between_the_default_and_none() {
        // 500 bindings: 4 s unpaced, 500/qps under a limit; 8 s recorded is 125 a second.
        let model = Model(|qps, _| qps.map_or(4.0, |q| 4.0 + 500.0 / f64::from(q)));
        let (rates, took) = calibrate_scheduler(&model, 8.0);
        let qps = rates
            .limit(pace::Component::Scheduler)
            .map(|l| l.qps)
            .expect("a limit");
        assert!((100.0..=160.0).contains(&qps), "{qps}");
        assert!(took.is_some_and(|t| (t - 8.0).abs() < 0.8), "{took:?}");
        assert!(
            rates.components[1].summary.contains("calibrated: replaying deployment/shop/web's last update (500 pods, 8 s recorded) took 14.0 s at 50/100, 4.0 s unpaced"),
            "{}",
            rates.components[1].summary
        );
    }

    #[test]
    fn slower_than_every_limit_makes_each_request_slower() {
        // 50 pods one at a time: 76 s as the rehearsal's own, and 100 s more per second of
        // latency; 96 s recorded is 200 ms.
        let model = Model(|_, latency| 76.0 + 100.0 * latency);
        let latency = calibrate_latency(
            &model,
            &update(96.0),
            measured_rates(),
            pace::Component::Controllers,
            76.0,
        )
        .expect("replays")
        .latency(pace::Component::Controllers)
        .expect("a latency");
        assert!((160..=250).contains(&latency.as_millis()), "{latency:?}");
        // Already as slow as recorded: nothing to add.
        let rates = calibrate_latency(
            &Model(|_, latency| 96.0 + 100.0 * latency),
            &update(96.0),
            measured_rates(),
            pace::Component::Controllers,
            96.0,
        )
        .expect("replays");
        assert_eq!(rates.latency(pace::Component::Controllers), None);
    }

    /// A replay that only counts how often it ran.
    struct Counted(std::cell::Cell<usize>);

    impl Rehearsal for Counted {
        fn under(&self, _: &pace::Rates) -> anyhow::Result<Option<f64>> {
            self.0.set(self.0.get() + 1);
            Ok(Some(10.0))
        }
    }

    #[test]
    fn what_the_rates_already_took_is_not_replayed_again() {
        let counted = Counted(std::cell::Cell::new(0));
        let component = pace::Component::Scheduler;
        calibrate_one(&counted, &update(10.0), measured_rates(), component, None).expect("replays");
        // The reading (upstream's default here) and no limit.
        assert_eq!(counted.0.get(), 2);
        counted.0.set(0);
        let (_, took) = calibrate_one(
            &counted,
            &update(10.0),
            measured_rates(),
            component,
            Some(10.0),
        )
        .expect("replays");
        assert_eq!(counted.0.get(), 1);
        assert_eq!(took, Some(10.0));
    }
}
