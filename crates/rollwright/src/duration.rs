//! Durations on the command line, written as Go and kubectl write them (`1h`, `30m`, `1h30m`,
//! `90s`), so flags such as `--event-ttl` read as upstream's do.

use std::time::Duration;

/// Parses a duration flag; the error says how to write one.
pub fn parse(s: &str) -> Result<Duration, String> {
    // Go's `time.ParseDuration` takes a bare 0 (`--etcd-compaction-interval=0`); jiff wants a unit.
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    s.parse::<jiff::SignedDuration>()
        .ok()
        .and_then(|d| Duration::try_from(d).ok())
        .ok_or_else(|| format!("{s:?} is not a duration; write it as 1h, 30m or 90s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        let cases = [
            ("1h", Some(3600)),
            ("30m", Some(1800)),
            ("1h30m", Some(5400)),
            ("90s", Some(90)),
            ("0", Some(0)),
            ("0s", Some(0)),
            ("-1h", None),
            ("soon", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).ok().map(|d| d.as_secs()), want, "{text}");
        }
    }
}
