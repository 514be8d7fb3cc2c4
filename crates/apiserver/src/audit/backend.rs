//! The log backend: events as JSON lines appended to a file (`--audit-log-path`, `-` for
//! standard output), as upstream's `plugin/pkg/audit/log`.
//!
//! Upstream's log backend writes in the request's goroutine by default (its `blocking` mode). Here
//! requests hand their lines to a bounded queue that one thread writes out, so a request waits
//! on the disk only when the queue is full; then it waits for room rather than losing the event,
//! which keeps the blocking mode's promise that every event is written. The queue holds 10 000
//! events, upstream's batch buffer. A write error is logged and the event lost, as in upstream's
//! batch mode. The file is rotated as upstream's is ([`super::rotation`]).

use super::{
    AuditError,
    rotation::{RotatingFile, Rotation, append},
};
use std::{
    fs::DirBuilder,
    io::{BufWriter, Write},
    path::Path,
};
use tokio::sync::{mpsc, oneshot};

/// Events waiting to be written, at most.
const QUEUE: usize = 10_000;

enum Message {
    Line(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

/// Where events go.
#[derive(Clone, Debug)]
pub(crate) struct LogBackend {
    queue: mpsc::Sender<Message>,
}

impl LogBackend {
    /// Appends to the file at `path` (created `0600`, its directory `0700`, as upstream's
    /// `ensureLogFile`), or writes to standard output for `-`; the file rotates at lumberjack's
    /// default size (100 MB), keeping every backup.
    #[cfg(test)]
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Self::open_rotating(path, Rotation::default())
    }

    /// [`Self::open`], rotated as `rotation` says.
    pub fn open_rotating(path: &Path, rotation: Rotation) -> Result<Self, AuditError> {
        if path.as_os_str() == "-" {
            return Ok(Self::to(Box::new(std::io::stdout())));
        }
        let err = |at: &Path| {
            let at = at.to_path_buf();
            move |source| AuditError::LogFile { path: at, source }
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut builder = DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            builder.create(dir).map_err(err(dir))?;
        }
        let file = append(path).map_err(err(path))?;
        let file =
            RotatingFile::new(path.to_path_buf(), file, append, rotation).map_err(err(path))?;
        Ok(Self::to(Box::new(file)))
    }

    /// Writes to `out` from a thread of its own, until every sender is gone.
    fn to(out: Box<dyn Write + Send>) -> Self {
        let (queue, mut rx) = mpsc::channel(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || {
                let mut out = BufWriter::new(out);
                while let Some(first) = rx.blocking_recv() {
                    let mut next = Some(first);
                    // Write all that is queued, then flush once.
                    while let Some(msg) = next.take().or_else(|| rx.try_recv().ok()) {
                        match msg {
                            Message::Line(line) => {
                                if let Err(e) = out.write_all(&line) {
                                    tracing::error!(error = %e, "writing an audit event failed");
                                }
                            }
                            Message::Flush(done) => {
                                if let Err(e) = out.flush() {
                                    tracing::error!(error = %e, "flushing the audit log failed");
                                }
                                let _ = done.send(());
                            }
                        }
                    }
                    if let Err(e) = out.flush() {
                        tracing::error!(error = %e, "flushing the audit log failed");
                    }
                }
            });
        if let Err(e) = spawned {
            // The receiver went with the closure: every send will report the backend gone.
            tracing::error!(error = %e, "starting the audit log writer failed");
        }
        Self { queue }
    }

    /// Queues a line, waiting for room when the queue is full; false if the writer is gone.
    pub async fn send(&self, line: Vec<u8>) -> bool {
        self.queue.send(Message::Line(line)).await.is_ok()
    }

    /// Queues a line from code that cannot wait (a response body being dropped): if the queue
    /// is full, a task waits for room instead.
    pub fn send_now(&self, line: Vec<u8>) {
        match self.queue.try_send(Message::Line(line)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(msg)) => {
                let queue = self.queue.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => {
                        rt.spawn(async move {
                            let _ = queue.send(msg).await;
                        });
                    }
                    Err(_) => {
                        tracing::error!("audit log queue full outside the runtime; event lost")
                    }
                }
            }
        }
    }

    /// Returns once every line queued before the call is written and flushed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn appends_lines_to_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit").join("audit.log");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "earlier\n").unwrap();
        let backend = LogBackend::open(&path).unwrap();
        assert!(backend.send(b"one\n".to_vec()).await);
        backend.send_now(b"two\n".to_vec());
        backend.flush().await;
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "earlier\none\ntwo\n"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_new_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("audit.log");
        let backend = LogBackend::open(&path).unwrap();
        backend.flush().await;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[tokio::test]
    async fn an_unwritable_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = LogBackend::open(&file.join("audit.log")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("ensureLogFile: {}: ", file.display())),
            "{err}"
        );
    }
}
