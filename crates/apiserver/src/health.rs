//! `/healthz`, `/livez` and `/readyz`, with upstream's named checks and output.
//!
//! Each endpoint runs its checks and answers `ok` (200) when all pass. When one fails it answers
//! 500 with one line per check, `[+]etcd ok` or `[-]etcd failed: reason withheld`, then `readyz
//! check failed`; the reason goes to the log, as upstream keeps it from unauthenticated callers.
//! `?verbose` lists the checks on success too, `?exclude=<name>` skips one, and
//! `/readyz/<name>` runs one alone.

use crate::state::ApiServer;
use axum::{
    extract::{Path, RawQuery, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use std::time::Duration;

/// One named check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// The server answers at all.
    Ping,
    /// The store takes writes (upstream's name for its storage check).
    Etcd,
    /// The watch cache follows the store (it is not stuck relisting).
    InformerSync,
}

/// How long the store check may take before it counts as failed.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

impl Check {
    fn name(self) -> &'static str {
        match self {
            Check::Ping => "ping",
            Check::Etcd => "etcd",
            Check::InformerSync => "informer-sync",
        }
    }

    async fn run(self, s: &ApiServer) -> Result<(), String> {
        match self {
            Check::Ping => Ok(()),
            Check::Etcd => match tokio::time::timeout(STORE_CHECK_TIMEOUT, s.store.check()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {STORE_CHECK_TIMEOUT:?}")),
            },
            Check::InformerSync => {
                if s.cache.is_following() {
                    Ok(())
                } else {
                    Err("the watch cache is relisting from the store".into())
                }
            }
        }
    }
}

/// The checks of each endpoint (upstream's livez leaves out readiness-only checks).
fn checks(endpoint: &str) -> &'static [Check] {
    match endpoint {
        "livez" => &[Check::Ping, Check::Etcd],
        _ => &[Check::Ping, Check::Etcd, Check::InformerSync],
    }
}

/// `GET /healthz`, `/livez`, `/readyz`.
pub(crate) async fn report(endpoint: &'static str, s: &ApiServer, query: Option<&str>) -> Response {
    let mut verbose = false;
    let mut excluded = Vec::new();
    for pair in query.unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "exclude" => excluded.push(value.to_string()),
            _ => {}
        }
    }
    let mut lines = String::new();
    let mut failed = false;
    for check in checks(endpoint) {
        if excluded.iter().any(|e| e == check.name()) {
            lines.push_str(&format!("[+]{} excluded: ok\n", check.name()));
            continue;
        }
        match check.run(s).await {
            Ok(()) => lines.push_str(&format!("[+]{} ok\n", check.name())),
            Err(reason) => {
                tracing::warn!(check = check.name(), %reason, "{endpoint} check failed");
                lines.push_str(&format!("[-]{} failed: reason withheld\n", check.name()));
                failed = true;
            }
        }
    }
    if failed {
        lines.push_str(&format!("{endpoint} check failed"));
        return (StatusCode::INTERNAL_SERVER_ERROR, lines).into_response();
    }
    if !verbose {
        return (StatusCode::OK, "ok").into_response();
    }
    lines.push_str(&format!("{endpoint} check passed\n"));
    (StatusCode::OK, lines).into_response()
}

/// `GET /readyz/<check>` (and the same under `/healthz`, `/livez`).
pub(crate) async fn single(endpoint: &'static str, s: &ApiServer, name: &str) -> Response {
    let Some(check) = checks(endpoint).iter().find(|c| c.name() == name) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no {endpoint} check named {name}\n"),
        )
            .into_response();
    };
    match check.run(s).await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => {
            tracing::warn!(check = name, %reason, "{endpoint} check failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: reason withheld\n",
            )
                .into_response()
        }
    }
}

macro_rules! endpoint {
    ($all:ident, $one:ident, $name:literal) => {
        pub(crate) async fn $all(State(s): State<ApiServer>, RawQuery(q): RawQuery) -> Response {
            report($name, &s, q.as_deref()).await
        }

        pub(crate) async fn $one(State(s): State<ApiServer>, Path(name): Path<String>) -> Response {
            single($name, &s, &name).await
        }
    };
}

endpoint!(healthz, healthz_check, "healthz");
endpoint!(livez, livez_check, "livez");
endpoint!(readyz, readyz_check, "readyz");
