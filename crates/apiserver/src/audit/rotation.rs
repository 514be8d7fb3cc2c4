//! The audit log's rotation, as upstream's log backend rotates it (`--audit-log-maxsize`,
//! `--audit-log-maxbackup`, `--audit-log-maxage`, through gopkg.in/natefinch/lumberjack.v2): when
//! a write would take the file past its size, it is renamed to `NAME-TIMESTAMP.EXT` (UTC,
//! `2006-01-02T15-04-05.000`) and a new file is started; then the oldest backups past the count
//! and those older than the age are removed.
//!
//! Hand-written: the rotation crates name their backups otherwise, and tools that collect
//! kube-apiserver's audit logs expect lumberjack's names.

use std::{
    fs::{File, OpenOptions},
    io::{self, Write},
    path::{Path, PathBuf},
};

/// lumberjack's size when none is given (`defaultMaxSize`, in megabytes).
const DEFAULT_MAX_SIZE_MB: u64 = 100;

/// How the log is rotated: upstream's three flags; 0 means lumberjack's default (100 MB for the
/// size, no limit for the count and the age).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// `--audit-log-maxsize`: megabytes a file may reach before it is rotated.
    pub max_size_mb: u64,
    /// `--audit-log-maxbackup`: rotated files kept.
    pub max_backups: usize,
    /// `--audit-log-maxage`: days a rotated file is kept.
    pub max_age_days: u64,
}

impl Rotation {
    fn max_bytes(&self) -> u64 {
        let mb = if self.max_size_mb == 0 {
            DEFAULT_MAX_SIZE_MB
        } else {
            self.max_size_mb
        };
        mb.saturating_mul(1024 * 1024)
    }
}

/// The log file, rotated as it grows.
pub(crate) struct RotatingFile {
    path: PathBuf,
    open: fn(&Path) -> io::Result<File>,
    file: File,
    size: u64,
    rotation: Rotation,
    /// The time the last backup was named for: a second rotation within the same millisecond
    /// is named a millisecond later, so that no backup replaces another.
    last_backup: Option<jiff::Timestamp>,
}

impl RotatingFile {
    /// Continues the file `file` (opened by `open`, which opens the new files too) at `path`.
    pub(crate) fn new(
        path: PathBuf,
        file: File,
        open: fn(&Path) -> io::Result<File>,
        rotation: Rotation,
    ) -> io::Result<Self> {
        let size = file.metadata()?.len();
        Ok(Self {
            path,
            open,
            file,
            size,
            rotation,
            last_backup: None,
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let mut at = jiff::Timestamp::now();
        if let Some(last) = self.last_backup
            && at.as_millisecond() <= last.as_millisecond()
        {
            at = jiff::Timestamp::from_millisecond(last.as_millisecond() + 1).unwrap_or(at);
        }
        self.last_backup = Some(at);
        std::fs::rename(&self.path, backup_name(&self.path, at))?;
        self.file = (self.open)(&self.path)?;
        self.size = 0;
        if let Err(e) = self.prune(jiff::Timestamp::now()) {
            tracing::warn!(error = %e, "removing old audit log backups failed");
        }
        Ok(())
    }

    /// Removes the backups past the count and the age (lumberjack's `millRunOnce`).
    fn prune(&self, now: jiff::Timestamp) -> io::Result<()> {
        let mut backups = backups(&self.path)?;
        // Newest first.
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let cutoff = (self.rotation.max_age_days > 0).then(|| {
            let secs = i64::try_from(self.rotation.max_age_days.saturating_mul(86_400))
                .unwrap_or(i64::MAX);
            now.as_second().saturating_sub(secs)
        });
        for (i, (at, path)) in backups.iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && i >= self.rotation.max_backups;
            let too_old = cutoff.is_some_and(|c| at.as_second() < c);
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len() as u64;
        // lumberjack refuses what no file could hold; the backend logs it and the event is lost.
        if len > self.rotation.max_bytes() {
            return Err(io::Error::other(format!(
                "write length {len} exceeds maximum file size {}",
                self.rotation.max_bytes()
            )));
        }
        if self.size > 0 && self.size.saturating_add(len) > self.rotation.max_bytes() {
            self.rotate()?;
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// lumberjack's `backupName`: `dir/NAME-2006-01-02T15-04-05.000.EXT`, in UTC.
fn backup_name(path: &Path, at: jiff::Timestamp) -> PathBuf {
    let (prefix, ext) = split(path);
    let stamp = at.strftime("%Y-%m-%dT%H-%M-%S%.3f").to_string();
    path.with_file_name(format!("{prefix}-{stamp}{ext}"))
}

/// The file name's stem and extension (with its dot), as Go's `filepath.Ext` splits them.
fn split(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.') {
        Some(i) => (name[..i].to_string(), name[i..].to_string()),
        None => (name, String::new()),
    }
}

/// The backups of `path` beside it, with the time each one's name says.
fn backups(path: &Path) -> io::Result<Vec<(jiff::Timestamp, PathBuf)>> {
    let (prefix, ext) = split(path);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stamp) = name
            .strip_prefix(&format!("{prefix}-"))
            .and_then(|rest| rest.strip_suffix(&ext))
        else {
            continue;
        };
        let Ok(at) = jiff::civil::DateTime::strptime("%Y-%m-%dT%H-%M-%S%.f", stamp)
            .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC).map(|z| z.timestamp()))
        else {
            continue;
        };
        out.push((at, entry.path()));
    }
    Ok(out)
}

/// Opens `path` for appending, as the backend first opened it.
pub(crate) fn append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_are_named_as_lumberjack_names_them() {
        let at: jiff::Timestamp = "2026-11-28T22:03:57.123Z".parse().unwrap();
        assert_eq!(
            backup_name(Path::new("/var/log/audit.log"), at),
            PathBuf::from("/var/log/audit-2026-11-28T22-03-57.123.log")
        );
        assert_eq!(
            backup_name(Path::new("audit"), at),
            PathBuf::from("audit-2026-11-28T22-03-57.123")
        );
    }

    #[test]
    fn a_full_file_is_rotated_and_old_backups_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_size_mb: 1,
            max_backups: 2,
            max_age_days: 0,
        };
        let mut log =
            RotatingFile::new(path.clone(), append(&path).unwrap(), append, rotation).unwrap();
        let line = vec![b'x'; 1023]
            .into_iter()
            .chain([b'\n'])
            .collect::<Vec<u8>>();
        // 4.5 MiB of lines: four rotations, of which the two newest backups are kept.
        for _ in 0..(4 * 1024 + 512) {
            log.write_all(&line).unwrap();
        }
        log.flush().unwrap();
        let found = backups(&path).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        for (_, b) in &found {
            assert_eq!(std::fs::metadata(b).unwrap().len(), 1024 * 1024);
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 512 * 1024);
    }

    #[test]
    fn a_write_larger_than_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_size_mb: 1,
            ..Rotation::default()
        };
        let mut log =
            RotatingFile::new(path.clone(), append(&path).unwrap(), append, rotation).unwrap();
        let e = log.write(&vec![b'x'; 1024 * 1024 + 1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "write length 1048577 exceeds maximum file size 1048576"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn backups_older_than_the_age_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let old: jiff::Timestamp = "2026-11-01T00:00:00Z".parse().unwrap();
        let recent: jiff::Timestamp = "2026-11-27T00:00:00Z".parse().unwrap();
        for at in [old, recent] {
            std::fs::write(backup_name(&path, at), "x\n").unwrap();
        }
        std::fs::write(dir.path().join("unrelated.log"), "y\n").unwrap();
        let rotation = Rotation {
            max_size_mb: 1,
            max_backups: 0,
            max_age_days: 7,
        };
        let log =
            RotatingFile::new(path.clone(), append(&path).unwrap(), append, rotation).unwrap();
        log.prune("2026-11-28T00:00:00Z".parse().unwrap()).unwrap();
        let found = backups(&path).unwrap();
        assert_eq!(
            found.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            vec![recent]
        );
        assert!(dir.path().join("unrelated.log").exists());
    }
}
