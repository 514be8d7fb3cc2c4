//! Audit logging, as upstream's `k8s.io/apiserver/pkg/audit`: a [`Policy`] decides for each
//! request how much is recorded, the [filter](layer) records it at each stage of the request as
//! an `audit.k8s.io/v1` Event, and the log backend appends the events to a file as JSON lines.
//!
//! Hooks for the rest of the pipeline: code serving a request adds annotations to its event with
//! [`annotate`] (the authorization layer's decision with [`record_decision`]); the
//! authentication layer records the requests it refuses with [`failed_authentication`];
//! [`attributes`] describes a request as upstream's `RequestInfo` does, for authorizers too.

mod backend;
mod event;
mod filter;
mod policy;
mod rotation;

pub(crate) use filter::run;
pub(crate) use filter::{annotate, failed_authentication, record_decision};
pub use policy::{Policy, PolicyError};
pub use rotation::Rotation;

use backend::LogBackend;
use event::Event;
use policy::{Stage, Stages};
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

/// Why auditing could not be set up; the messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file is missing or wrong.
    #[error("loading audit policy file: {0}")]
    Policy(#[from] PolicyError),
    /// The log file cannot be created or opened.
    #[error("ensureLogFile: {}: {source}", path.display())]
    LogFile {
        /// The file or directory that could not be made.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A policy and the log its events go to: what [`crate::ServerOptions::audit`] takes.
pub struct Auditor {
    policy: Policy,
    backend: LogBackend,
}

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor").finish_non_exhaustive()
    }
}

impl Auditor {
    /// Records requests as `policy` says to the file at `log_path` (`-`: standard output),
    /// rotated at upstream's defaults.
    pub fn new(policy: Policy, log_path: &Path) -> Result<Self, AuditError> {
        Self::rotating(policy, log_path, Rotation::default())
    }

    /// [`Self::new`], the file rotated as `rotation` says.
    pub fn rotating(
        policy: Policy,
        log_path: &Path,
        rotation: Rotation,
    ) -> Result<Self, AuditError> {
        Ok(Self {
            policy,
            backend: LogBackend::open_rotating(log_path, rotation)?,
        })
    }

    /// Upstream's `--audit-policy-file`, `--audit-log-path` and the rotation flags: auditing
    /// needs a policy and a path. A policy is read and checked even without a log, so that a bad
    /// one is found at start-up.
    pub fn from_flags(
        policy_file: Option<&Path>,
        log_path: Option<&Path>,
        rotation: Rotation,
    ) -> Result<Option<Arc<Self>>, AuditError> {
        let policy = policy_file.map(Policy::load).transpose()?;
        match (policy, log_path) {
            (Some(policy), Some(path)) => {
                Ok(Some(Arc::new(Self::rotating(policy, path, rotation)?)))
            }
            (None, Some(_)) => {
                tracing::info!(
                    "No audit policy file provided, no events will be recorded for log backend"
                );
                Ok(None)
            }
            (Some(_), None) => {
                tracing::info!("No audit log path provided, no events will be recorded");
                Ok(None)
            }
            (None, None) => Ok(None),
        }
    }

    /// Returns once every event recorded so far is written out.
    pub async fn flush(&self) {
        self.backend.flush().await;
    }

    /// Writes `event` at `stage` unless the stage is omitted (upstream's `processAuditEvent`);
    /// false if the log cannot take it.
    async fn emit(&self, event: &mut Event, stage: Stage, omit: Stages) -> bool {
        if omit.contains(stage) {
            return true;
        }
        stamp(event, stage);
        self.backend.send(event.to_line()).await
    }

    /// [`Self::emit`] from code that cannot wait.
    fn emit_now(&self, event: &mut Event, stage: Stage, omit: Stages) {
        if omit.contains(stage) {
            return;
        }
        stamp(event, stage);
        self.backend.send_now(event.to_line());
    }
}

fn stamp(event: &mut Event, stage: Stage) {
    event.stage = stage;
    event.stage_timestamp = if stage == Stage::RequestReceived {
        event.request_received_timestamp
    } else {
        event::MicroTime::now()
    };
}
