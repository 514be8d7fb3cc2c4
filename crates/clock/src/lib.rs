//! The wall clock every control-plane component reads.
//!
//! Timestamps (`creationTimestamp`, conditions' `lastTransitionTime`, lease renewals, an
//! event's `lastTimestamp`) and the timers that act on them (`minReadySeconds`, progress
//! deadlines, grace periods, node-monitor periods) have to agree. Timers run on tokio's clock;
//! this crate derives the wall clock from that same clock, so that a runtime running on a
//! paused, self-advancing clock (`tokio::time::pause`: time jumps to the next timer whenever
//! nothing is left to do) moves the timestamps by exactly as much as it moves the timers.
//! `rollwright whatif` rehearses a rollout that way: minutes of rollout in the seconds its work
//! takes. Anywhere else tokio's clock is the real monotonic clock, and [`now`] is the real
//! time, give or take the wall clock's adjustments since the process started.

use std::{sync::OnceLock, time::SystemTime};

/// The wall time and tokio instant read together the first time anyone asked.
fn anchor() -> &'static (jiff::Timestamp, std::time::Instant) {
    static ANCHOR: OnceLock<(jiff::Timestamp, std::time::Instant)> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        (
            jiff::Timestamp::now(),
            tokio::time::Instant::now().into_std(),
        )
    })
}

/// The time now, as the running tokio runtime's clock has it.
pub fn now() -> jiff::Timestamp {
    let (wall, at) = *anchor();
    let instant = tokio::time::Instant::now().into_std();
    // Either side of the anchor: a paused runtime's clock can run ahead of the real one.
    let moved = match instant.checked_duration_since(at) {
        Some(ahead) => wall.checked_add(ahead),
        None => wall.checked_sub(at.duration_since(instant)),
    };
    moved.unwrap_or(wall)
}

/// [`now`] as a [`SystemTime`].
pub fn system_now() -> SystemTime {
    SystemTime::from(now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn outside_a_runtime_it_is_the_real_time() {
        let before = jiff::Timestamp::now();
        let t = now();
        let after = jiff::Timestamp::now();
        // The anchor and the real clock agree to well within a second.
        assert!(t >= before - Duration::from_secs(1) && t <= after + Duration::from_secs(1));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_paused_runtime_moves_the_wall_clock_with_its_timers() {
        let before = now();
        let real = std::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let after = now();
        let moved = after.duration_since(before);
        assert!(
            moved >= jiff::SignedDuration::from_secs(3600),
            "the wall clock moved only {moved:?}"
        );
        // ... while an hour did not pass.
        assert!(real.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn system_time_agrees() {
        let a = system_now();
        let b = SystemTime::from(now());
        let gap = b.duration_since(a).unwrap_or_default();
        assert!(gap < Duration::from_secs(1));
    }
}
