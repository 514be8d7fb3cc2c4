//! Levels and versions of the Pod Security Standards (upstream's `api/helpers.go`).

use std::{cmp::Ordering, fmt, str::FromStr};

/// How strict a policy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// Known privilege escalations are refused.
    Baseline,
    /// Hardened pods only.
    Restricted,
}

impl Level {
    /// The name labels and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Privileged => "privileged",
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a label value is not a level or a version; the texts are upstream's field error details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not `privileged`, `baseline` or `restricted`.
    #[error("must be one of privileged, baseline, restricted")]
    Level,
    /// Not `latest` or `v1.<minor>`.
    #[error("must be \"latest\" or \"v1.x\"")]
    Version,
}

impl FromStr for Level {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "privileged" => Ok(Self::Privileged),
            "baseline" => Ok(Self::Baseline),
            "restricted" => Ok(Self::Restricted),
            _ => Err(ParseError::Level),
        }
    }
}

/// The version of the standards a policy holds pods to: `latest`, or the checks as they were
/// in Kubernetes `v1.<minor>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// Whatever the newest checks are.
    Latest,
    /// `v1.<minor>`.
    Minor(u64),
}

impl Version {
    /// Whether `self` comes before `other` (`latest` comes after every numbered version).
    pub fn older(self, other: Version) -> bool {
        self.cmp(&other) == Ordering::Less
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Latest, Self::Latest) => Ordering::Equal,
            (Self::Latest, Self::Minor(_)) => Ordering::Greater,
            (Self::Minor(_), Self::Latest) => Ordering::Less,
            (Self::Minor(a), Self::Minor(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Latest => f.write_str("latest"),
            Self::Minor(m) => write!(f, "v1.{m}"),
        }
    }
}

impl FromStr for Version {
    type Err = ParseError;

    /// Upstream accepts `latest` or `^v1\.([0-9]|[1-9][0-9]*)$` whose number fits an int.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "latest" {
            return Ok(Self::Latest);
        }
        let minor = s.strip_prefix("v1.").ok_or(ParseError::Version)?;
        let digits_only = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits_only || (minor.len() > 1 && minor.starts_with('0')) {
            return Err(ParseError::Version);
        }
        minor
            .parse::<i64>()
            .ok()
            .and_then(|m| u64::try_from(m).ok())
            .map(Self::Minor)
            .ok_or(ParseError::Version)
    }
}

/// A level at a version, printed `restricted:latest` as upstream's messages do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// How strict.
    pub level: Level,
    /// Which checks.
    pub version: Version,
}

impl LevelVersion {
    /// `level` at `version`.
    pub fn new(level: Level, version: Version) -> Self {
        Self { level, version }
    }

    /// Whether two policies judge every pod alike: both privileged, or the same level and
    /// version (upstream's `Equivalent`).
    pub fn equivalent(&self, other: &Self) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl Default for LevelVersion {
    fn default() -> Self {
        Self::new(Level::Privileged, Version::Latest)
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions_as_upstream() {
        // Upstream's api/helpers_test.go TestParseVersion cases, and the regexp's edges.
        for (input, want) in [
            ("latest", Ok(Version::Latest)),
            ("v1.0", Ok(Version::Minor(0))),
            ("v1.1", Ok(Version::Minor(1))),
            ("v1.20", Ok(Version::Minor(20))),
            ("v1.10000", Ok(Version::Minor(10000))),
            ("foo", Err(ParseError::Version)),
            ("v1.01", Err(ParseError::Version)),
            ("v2.0", Err(ParseError::Version)),
            ("1.1", Err(ParseError::Version)),
            ("v1", Err(ParseError::Version)),
            ("v1.", Err(ParseError::Version)),
            ("v1.-1", Err(ParseError::Version)),
            ("v1.0 ", Err(ParseError::Version)),
            ("v1.99999999999999999999", Err(ParseError::Version)),
            ("Latest", Err(ParseError::Version)),
            ("", Err(ParseError::Version)),
        ] {
            assert_eq!(input.parse::<Version>(), want, "{input:?}");
        }
    }

    #[test]
    fn parses_levels_and_prints_upstreams_errors() {
        assert_eq!("baseline".parse::<Level>(), Ok(Level::Baseline));
        assert_eq!("Baseline".parse::<Level>(), Err(ParseError::Level));
        assert_eq!(
            ParseError::Level.to_string(),
            "must be one of privileged, baseline, restricted"
        );
        assert_eq!(
            ParseError::Version.to_string(),
            r#"must be "latest" or "v1.x""#
        );
    }

    #[test]
    fn orders_latest_after_every_version() {
        assert!(Version::Minor(27).older(Version::Latest));
        assert!(!Version::Latest.older(Version::Minor(1000)));
        assert!(Version::Minor(9).older(Version::Minor(10)));
        assert_eq!(
            LevelVersion::new(Level::Restricted, Version::Minor(25)).to_string(),
            "restricted:v1.25"
        );
        assert!(
            LevelVersion::new(Level::Privileged, Version::Minor(3))
                .equivalent(&LevelVersion::default())
        );
    }
}
