//! Durations as people write them (`500ms`, `2s`, `1m30s`) and delay distributions sampled with a
//! seeded RNG, so a simulated run is reproducible.

use rand::{Rng, RngCore, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Deserializer, de};
use std::time::Duration;

/// Why a duration or distribution could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    /// Not a number followed by a unit.
    #[error("invalid duration {0:?}: expected e.g. 500ms, 2s, 1m30s")]
    Invalid(String),
}

/// Parses Go-style durations (`300ms`, `1.5s`, `2m`, `1h30m`, `0`), as `kubectl` users write them.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::Invalid(s.to_string());
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_end == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        let after = &rest[num_end..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let scale = match &after[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &after[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// Formats a duration the way Go's `time.Duration.String` does (`1.234s`, `523ms`), which is how
/// upstream's kubelet messages print them.
pub fn format_go(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim_float(nanos as f64 / 1e3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim_float(nanos as f64 / 1e6));
    }
    let secs = d.as_secs_f64();
    let hours = (secs / 3600.0).floor();
    let minutes = ((secs - hours * 3600.0) / 60.0).floor();
    let s = secs - hours * 3600.0 - minutes * 60.0;
    let mut out = String::new();
    if hours > 0.0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0.0 || minutes > 0.0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{}s", trim_float((s * 1e9).round() / 1e9)));
    out
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A duration read from YAML as a string such as `2s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map(Dur).map_err(de::Error::custom)
    }
}

/// A delay that varies per pod, so a simulated rollout does not move in lockstep.
#[derive(Clone, Debug, PartialEq)]
pub enum Distribution {
    /// Always the same.
    Fixed(Duration),
    /// Evenly spread between the two bounds.
    Uniform(Duration, Duration),
    /// Bell-shaped around `mean`; negative samples are clamped to zero.
    Normal {
        /// The centre.
        mean: Duration,
        /// The spread.
        stddev: Duration,
    },
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Fixed(Duration::ZERO)
    }
}

impl Distribution {
    /// A delay drawn from this distribution.
    pub fn sample(&self, rng: &mut impl RngCore) -> Duration {
        match *self {
            Distribution::Fixed(d) => d,
            Distribution::Uniform(a, b) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                if lo == hi {
                    return lo;
                }
                let f: f64 = rng.random();
                lo + (hi - lo).mul_f64(f)
            }
            Distribution::Normal { mean, stddev } => {
                // Box-Muller: two uniforms make one standard normal sample.
                let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                let u2: f64 = rng.random();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let v = mean.as_secs_f64() + z * stddev.as_secs_f64();
                Duration::try_from_secs_f64(v.max(0.0)).unwrap_or(Duration::ZERO)
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum DistributionRepr {
    Fixed(Dur),
    Uniform(Dur, Dur),
    Normal { mean: Dur, stddev: Dur },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DelayRepr {
    Plain(String),
    Dist(DistributionRepr),
}

impl<'de> Deserialize<'de> for Distribution {
    /// Accepts a plain duration (`2s`, meaning fixed) or `{fixed: ..}`, `{uniform: [a, b]}`,
    /// `{normal: {mean: .., stddev: ..}}`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match DelayRepr::deserialize(d)? {
            DelayRepr::Plain(s) => {
                Distribution::Fixed(parse_duration(&s).map_err(de::Error::custom)?)
            }
            DelayRepr::Dist(DistributionRepr::Fixed(x)) => Distribution::Fixed(x.0),
            DelayRepr::Dist(DistributionRepr::Uniform(a, b)) => Distribution::Uniform(a.0, b.0),
            DelayRepr::Dist(DistributionRepr::Normal { mean, stddev }) => Distribution::Normal {
                mean: mean.0,
                stddev: stddev.0,
            },
        })
    }
}

/// FNV-1a: a hash that is the same in every build and run (std's hasher promises neither).
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The RNG of one pod: the profile's seed plus the pod's identity, so a pod draws the same
/// delays and faults in every run with the same seed.
pub fn pod_rng(seed: u64, namespace: &str, name: &str, uid: &str) -> StdRng {
    StdRng::seed_from_u64(
        seed ^ stable_hash(&[namespace.as_bytes(), name.as_bytes(), uid.as_bytes()]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        let cases = [
            ("500ms", Some(Duration::from_millis(500))),
            ("2s", Some(Duration::from_secs(2))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("1m", Some(Duration::from_secs(60))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("1h", Some(Duration::from_secs(3600))),
            ("0", Some(Duration::ZERO)),
            ("", None),
            ("2", None),
            ("s", None),
            ("2 parsecs", None),
            ("-1s", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).ok(), want, "{input}");
        }
    }

    #[test]
    fn durations_format_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(523), "523ms"),
            (Duration::from_millis(1234), "1.234s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3661), "1h1m1s"),
            (Duration::from_micros(1500), "1.5ms"),
        ];
        for (d, want) in cases {
            assert_eq!(format_go(d), want);
        }
    }

    #[test]
    fn distributions_read_from_yaml() {
        let cases = [
            ("2s", Distribution::Fixed(Duration::from_secs(2))),
            (
                "{fixed: 500ms}",
                Distribution::Fixed(Duration::from_millis(500)),
            ),
            (
                "{uniform: [1s, 3s]}",
                Distribution::Uniform(Duration::from_secs(1), Duration::from_secs(3)),
            ),
            (
                "{normal: {mean: 2s, stddev: 500ms}}",
                Distribution::Normal {
                    mean: Duration::from_secs(2),
                    stddev: Duration::from_millis(500),
                },
            ),
        ];
        for (yaml, want) in cases {
            let got: Distribution = serde_saphyr::from_str(yaml).unwrap();
            assert_eq!(got, want, "{yaml}");
        }
        assert!(serde_saphyr::from_str::<Distribution>("{poisson: 2s}").is_err());
        assert!(serde_saphyr::from_str::<Distribution>("{fixed: soon}").is_err());
    }

    #[test]
    fn samples_stay_in_range_and_repeat_with_the_seed() {
        let uniform = Distribution::Uniform(Duration::from_secs(1), Duration::from_secs(3));
        let normal = Distribution::Normal {
            mean: Duration::from_millis(10),
            stddev: Duration::from_secs(1),
        };
        let mut a = pod_rng(7, "default", "web", "u1");
        let mut b = pod_rng(7, "default", "web", "u1");
        for _ in 0..200 {
            let x = uniform.sample(&mut a);
            assert!(x >= Duration::from_secs(1) && x <= Duration::from_secs(3));
            assert_eq!(x, uniform.sample(&mut b), "same seed, same draws");
            let _ = normal.sample(&mut a); // clamped at zero, never panics
            let _ = normal.sample(&mut b);
        }
        let mut c = pod_rng(8, "default", "web", "u1");
        let draws_a: Vec<_> = (0..5).map(|_| uniform.sample(&mut a)).collect();
        let draws_c: Vec<_> = (0..5).map(|_| uniform.sample(&mut c)).collect();
        assert_ne!(draws_a, draws_c, "another seed, other draws");
    }
}
