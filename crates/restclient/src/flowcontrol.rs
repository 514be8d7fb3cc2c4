//! client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`, which is
//! `golang.org/x/time/rate`'s `Limiter`: a bucket of `burst` tokens, full at the start, refilled
//! at `qps` tokens a second; each request takes one.
//!
//! Written here rather than taken from `governor`: x/time/rate *reserves* (a request arriving at
//! an empty bucket takes a token from the future, the bucket goes into debt and the request waits
//! until its token exists), so waiting requests are served in arrival order and a steady stream
//! never starves one of them; governor's `until_ready` instead re-checks until a token happens to
//! be free, and it runs on its own clock, which `tokio::time::pause()` does not move, so the
//! limiter could not be tested without sleeping. The arithmetic is x/time/rate's `advance` and
//! `reserveN`.

use std::{
    fmt,
    str::FromStr,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::time::Instant;

/// A client's rate limit: `qps` requests a second on average, `burst` at once after a quiet spell
/// (client-go's `rest.Config.QPS` and `Burst`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    /// Tokens added a second; more than zero.
    pub qps: f32,
    /// The bucket's size, at least one.
    pub burst: u32,
}

/// Why a limit is refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LimitError {
    /// x/time/rate refuses every request of a bucket smaller than one token.
    #[error("burst must be at least 1, got {0}")]
    Burst(u32),
    /// A rate of zero or less would never refill (client-go has no limiter at all then; say so
    /// with [`Limit::new`] returning `None` instead).
    #[error("qps must be a finite number above 0, got {0}")]
    Qps(f32),
}

impl Limit {
    /// kube-controller-manager's `--kube-api-qps`/`--kube-api-burst` defaults.
    pub const CONTROLLER_MANAGER: Limit = Limit {
        qps: 20.0,
        burst: 30,
    };
    /// kube-scheduler's `clientConnection.qps`/`burst` defaults.
    pub const SCHEDULER: Limit = Limit {
        qps: 50.0,
        burst: 100,
    };
    /// The kubelet's `kubeAPIQPS`/`kubeAPIBurst` defaults (since v1.27; 5/10 before).
    pub const KUBELET: Limit = Limit {
        qps: 50.0,
        burst: 100,
    };

    /// The limit of flags `--kube-api-qps QPS --kube-api-burst BURST`: `None` (no limiter) for a
    /// negative `qps`, as client-go builds no limiter for a negative `rest.Config.QPS`.
    pub fn new(qps: f32, burst: u32) -> Result<Option<Limit>, LimitError> {
        if qps < 0.0 {
            return Ok(None);
        }
        if !qps.is_finite() || qps == 0.0 {
            return Err(LimitError::Qps(qps));
        }
        if burst == 0 {
            return Err(LimitError::Burst(burst));
        }
        Ok(Some(Limit { qps, burst }))
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qps={},burst={}", self.qps, self.burst)
    }
}

impl FromStr for Limit {
    type Err = String;

    /// `qps=20,burst=30`, the form the limit is printed in.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (mut qps, mut burst) = (None, None);
        for part in s.split(',') {
            match part.trim().split_once('=') {
                Some(("qps", v)) => qps = Some(v.parse::<f32>().map_err(|e| format!("qps: {e}"))?),
                Some(("burst", v)) => {
                    burst = Some(v.parse::<u32>().map_err(|e| format!("burst: {e}"))?)
                }
                _ => return Err(format!("{part:?}: expected qps=N or burst=N")),
            }
        }
        let (Some(qps), Some(burst)) = (qps, burst) else {
            return Err(format!("{s:?}: expected qps=N,burst=N"));
        };
        Limit::new(qps, burst)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{s:?}: qps must be above 0"))
    }
}

/// The bucket's state: x/time/rate's `tokens` and `last`. Tokens go below zero when requests
/// reserve ahead of the refill.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(limit: Limit, now: Instant) -> Self {
        Self {
            qps: f64::from(limit.qps),
            burst: f64::from(limit.burst),
            tokens: f64::from(limit.burst),
            last: now,
        }
    }

    /// x/time/rate's `reserveN(now, 1)`: refills for the time since the last reservation (never
    /// beyond `burst`), takes one token, and answers when the request may go: `now` if a token
    /// was there, else when the debt is paid off.
    fn reserve(&mut self, now: Instant) -> Instant {
        let elapsed = now.saturating_duration_since(self.last);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.qps).min(self.burst);
        self.last = self.last.max(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            now
        } else {
            now + Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// One token bucket, shared by every clone: client-go gives each clientset one limiter, which
/// every request of that clientset (from any goroutine) waits on.
#[derive(Clone, Debug)]
pub struct RateLimiter {
    limit: Limit,
    bucket: Arc<Mutex<Bucket>>,
}

impl RateLimiter {
    /// A full bucket of `limit`.
    pub fn new(limit: Limit) -> Self {
        Self {
            limit,
            bucket: Arc::new(Mutex::new(Bucket::new(limit, Instant::now()))),
        }
    }

    /// The limit it enforces.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// Takes a token, and says when the request holding it may go (now, or later when the bucket
    /// was empty). Later callers get later instants: reservations are served in order.
    pub fn reserve(&self) -> Instant {
        let now = Instant::now();
        // The critical section is arithmetic only; a panic inside it cannot leave the bucket
        // inconsistent, so a poisoned lock is used as it is.
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        bucket.reserve(now)
    }

    /// Waits for a token (client-go's `RateLimiter.Wait`); answers how long it waited.
    pub async fn wait(&self) -> Duration {
        let start = Instant::now();
        tokio::time::sleep_until(self.reserve()).await;
        start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Rates and bursts whose arithmetic is exact in binary (1/4 s), so that paused-clock instants
    // compare exactly.
    const FOUR_PER_SECOND: Limit = Limit { qps: 4.0, burst: 3 };
    const QUARTER: Duration = Duration::from_millis(250);

    #[test]
    fn a_full_bucket_lets_burst_requests_go_at_once_then_one_per_interval() {
        let t0 = Instant::now();
        let mut bucket = Bucket::new(FOUR_PER_SECOND, t0);
        let at: Vec<Duration> = (0..6).map(|_| bucket.reserve(t0) - t0).collect();
        assert_eq!(
            at,
            [
                Duration::ZERO,
                Duration::ZERO,
                Duration::ZERO,
                QUARTER,
                2 * QUARTER,
                3 * QUARTER
            ]
        );
    }

    #[test]
    fn the_bucket_refills_at_qps_up_to_burst() {
        let t0 = Instant::now();
        let mut bucket = Bucket::new(FOUR_PER_SECOND, t0);
        for _ in 0..3 {
            bucket.reserve(t0);
        }
        // Half a second later two tokens are back: two go at once, the third waits a quarter.
        let t1 = t0 + 2 * QUARTER;
        assert_eq!(bucket.reserve(t1), t1);
        assert_eq!(bucket.reserve(t1), t1);
        assert_eq!(bucket.reserve(t1), t1 + QUARTER);
        // After a long quiet spell the bucket holds `burst` tokens, not more.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t2), t2);
        }
        assert_eq!(bucket.reserve(t2), t2 + QUARTER);
    }

    #[test]
    fn a_debt_is_paid_before_new_tokens_count() {
        let t0 = Instant::now();
        let mut bucket = Bucket::new(Limit { qps: 4.0, burst: 1 }, t0);
        assert_eq!(bucket.reserve(t0), t0);
        assert_eq!(bucket.reserve(t0), t0 + QUARTER);
        assert_eq!(bucket.reserve(t0), t0 + 2 * QUARTER);
        // A quarter later one token has come, and it pays the first debt: the next request still
        // goes half a second after t0 plus a quarter.
        let t1 = t0 + QUARTER;
        assert_eq!(bucket.reserve(t1), t0 + 3 * QUARTER);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_sleeps_on_the_paused_clock_and_clones_share_the_bucket() {
        let limiter = RateLimiter::new(FOUR_PER_SECOND);
        let clone = limiter.clone();
        let start = Instant::now();
        assert_eq!(limiter.wait().await, Duration::ZERO);
        assert_eq!(clone.wait().await, Duration::ZERO);
        assert_eq!(limiter.wait().await, Duration::ZERO);
        // The clone finds the bucket its original emptied.
        assert_eq!(clone.wait().await, QUARTER);
        assert_eq!(start.elapsed(), QUARTER);
        // Another limiter of the same limit has its own, full bucket.
        let other = RateLimiter::new(FOUR_PER_SECOND);
        assert_eq!(other.wait().await, Duration::ZERO);
    }

    #[test]
    fn limits_parse_as_flags_and_as_qps_burst_pairs() {
        assert_eq!(Limit::new(-1.0, 0), Ok(None));
        assert_eq!(Limit::new(0.0, 10), Err(LimitError::Qps(0.0)));
        assert_eq!(Limit::new(5.0, 0), Err(LimitError::Burst(0)));
        assert_eq!(
            "qps=20,burst=30".parse::<Limit>(),
            Ok(Limit::CONTROLLER_MANAGER)
        );
        assert_eq!(Limit::SCHEDULER.to_string(), "qps=50,burst=100");
        assert!("qps=20".parse::<Limit>().is_err());
        assert!("qps=0,burst=1".parse::<Limit>().is_err());
    }
}
