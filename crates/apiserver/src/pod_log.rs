//! `pods/log` for simulated nodes: the container's output as a kubelet would serve it, answered
//! from the pod's spec and status in this process. The server never dials a node (SECURITY.md,
//! "Simulated addresses are never dialled"): a simulated container prints what its command
//! plainly prints (`echo hello`, `sh -c "echo X; sleep N"`, `printf`; see the `command` crate),
//! each line at the time since the container started that the command prints it, and nothing
//! otherwise. Checks and messages are upstream's: `LogLocation` and `validateContainer`
//! (`pkg/registry/core/pod/strategy.go`), then the kubelet's `validateContainerLogStatus`,
//! whose refusals the API server relays as 400 BadRequest.

use crate::{
    error::{ApiError, ApiResult},
    request::{Params, Target, flag},
    state::ApiServer,
};
use axum::{
    body::Body,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use rand::{SeedableRng, rngs::StdRng};
use serde_json::Value;
use std::time::Duration;

/// How often a follow stream looks again at the pod, for the container's stop.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// One line of a container's log, with the time it was printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Line {
    at: Timestamp,
    text: String,
}

/// The `PodLogOptions` that shape the answer.
#[derive(Clone, Debug, Default)]
struct Options {
    container: Option<String>,
    previous: bool,
    follow: bool,
    timestamps: bool,
    tail_lines: Option<i64>,
    limit_bytes: Option<i64>,
    since: Option<Timestamp>,
}

fn int_param(name: &str, v: &Option<String>) -> ApiResult<Option<i64>> {
    v.as_deref()
        .map(|s| {
            s.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("invalid value {s:?} for {name}: not an integer"))
            })
        })
        .transpose()
}

impl Options {
    /// Upstream's `ValidatePodLogOptions`: counts must be positive (tailLines may be 0).
    fn from(p: &Params, name: &str) -> ApiResult<Self> {
        let tail_lines = int_param("tailLines", &p.tail_lines)?;
        let limit_bytes = int_param("limitBytes", &p.limit_bytes)?;
        let since_seconds = int_param("sinceSeconds", &p.since_seconds)?;
        let mut errors = Vec::new();
        if let Some(n) = tail_lines.filter(|n| *n < 0) {
            errors.push(format!(
                "tailLines: Invalid value: {n}: must be greater than or equal to 0"
            ));
        }
        if let Some(n) = limit_bytes.filter(|n| *n < 1) {
            errors.push(format!(
                "limitBytes: Invalid value: {n}: must be greater than 0"
            ));
        }
        if let Some(n) = since_seconds.filter(|n| *n < 1) {
            errors.push(format!(
                "sinceSeconds: Invalid value: {n}: must be greater than 0"
            ));
        }
        if since_seconds.is_some() && p.since_time.is_some() {
            errors.push(
                "[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
                    .into(),
            );
        }
        if !errors.is_empty() {
            let joined = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("[{}]", errors.join(", "))
            };
            return Err(ApiError {
                code: 422,
                reason: "Invalid",
                message: format!("PodLogOptions \"{name}\" is invalid: {joined}"),
                details: Some(serde_json::json!({"name": name, "kind": "PodLogOptions"})),
            });
        }
        let since = match (&p.since_time, since_seconds) {
            (Some(t), _) => Some(t.parse::<Timestamp>().map_err(|e| {
                ApiError::bad_request(format!("invalid value {t:?} for sinceTime: {e}"))
            })?),
            (None, Some(secs)) => Some(clock::now() - SignedDuration::from_secs(secs)),
            (None, None) => None,
        };
        Ok(Self {
            container: p.container.clone().filter(|c| !c.is_empty()),
            previous: flag(&p.previous),
            follow: flag(&p.follow),
            timestamps: flag(&p.timestamps),
            tail_lines,
            limit_bytes,
            since,
        })
    }
}

/// Upstream's `validateContainer`: the named container, or the only one.
pub(crate) fn container_of<'p>(pod: &'p Pod, wanted: Option<&str>) -> ApiResult<&'p Container> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref().ok_or_else(|| {
        ApiError::bad_request(format!("a container name must be specified for pod {name}"))
    })?;
    let all = || {
        spec.init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .chain(std::iter::empty())
    };
    match wanted {
        Some(c) => all().find(|x| x.name == c).ok_or_else(|| {
            ApiError::bad_request(format!("container {c} is not valid for pod {name}"))
        }),
        None => match spec.containers.as_slice() {
            [only] => Ok(only),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let names: Vec<&str> = all().map(|c| c.name.as_str()).collect();
                Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                )))
            }
        },
    }
}

/// The container's status as the node reported it.
pub(crate) fn status_of<'p>(pod: &'p Pod, container: &str) -> Option<&'p ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|s| s.name == container)
}

/// The kubelet's `validateContainerLogStatus`: which run's log is asked for, with its start and
/// stop, or the kubelet's refusal.
fn run_times(
    pod: &Pod,
    container: &str,
    previous: bool,
) -> ApiResult<(Timestamp, Option<Timestamp>)> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let refuse = |why: String| {
        Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{pod_name}\" {why}"
        )))
    };
    let Some(cs) = status_of(pod, container) else {
        // The node has not reported the container yet: it is being created.
        return refuse("is waiting to start: ContainerCreating".into());
    };
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| t.map(|t| t.0);
    let last = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let state = cs.state.as_ref();
    let (waiting, running, terminated) = (
        state.and_then(|s| s.waiting.as_ref()),
        state.and_then(|s| s.running.as_ref()),
        state.and_then(|s| s.terminated.as_ref()),
    );
    let ended = |t: &k8s_openapi::api::core::v1::ContainerStateTerminated| {
        Ok((
            time(t.started_at.as_ref()).unwrap_or_default(),
            Some(time(t.finished_at.as_ref()).unwrap_or_default()),
        ))
    };
    if previous {
        return match last {
            Some(t) if t.container_id.as_deref().is_some_and(|id| !id.is_empty()) => ended(t),
            _ => Err(ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{pod_name}\" not found"
            ))),
        };
    }
    if let Some(r) = running {
        return Ok((time(r.started_at.as_ref()).unwrap_or_default(), None));
    }
    if let Some(t) = terminated {
        return ended(t);
    }
    if let Some(t) = last {
        return ended(t);
    }
    match waiting {
        Some(w) => match w.reason.as_deref().unwrap_or_default() {
            "ErrImagePull" => refuse("is waiting to start: image can't be pulled".into()),
            "ImagePullBackOff" => {
                refuse("is waiting to start: trying and failing to pull image".into())
            }
            reason => refuse(format!("is waiting to start: {reason}")),
        },
        None => refuse("is waiting to start - no logs yet".into()),
    }
}

/// What the container's command prints, as lines timed from `started`; nothing for a command
/// the simulator does not interpret. The same pod prints the same (the seed is its uid).
fn printed_lines(pod: &Pod, container: &Container, started: Timestamp) -> Vec<Line> {
    let Some(program) = command::Program::of(container, pod) else {
        return Vec::new();
    };
    let seed = pod
        .metadata
        .uid
        .as_deref()
        .unwrap_or_default()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let Ok(transcript) = program.transcript(&mut StdRng::seed_from_u64(seed)) else {
        return Vec::new();
    };
    let mut lines: Vec<Line> = Vec::new();
    let mut open = false;
    for (offset, text) in transcript.printed {
        let at = started + SignedDuration::try_from(offset).unwrap_or(SignedDuration::MAX);
        for piece in text.split_inclusive('\n') {
            match lines.last_mut() {
                Some(last) if open => last.text.push_str(piece),
                _ => lines.push(Line {
                    at,
                    text: piece.to_string(),
                }),
            }
            open = !piece.ends_with('\n');
        }
    }
    lines
}

/// The answer's bytes for `lines` under the options (tail, since, timestamps; the byte limit is
/// applied by the caller over the whole answer).
fn render(lines: &[Line], o: &Options) -> String {
    let mut chosen: Vec<&Line> = lines
        .iter()
        .filter(|l| o.since.is_none_or(|s| l.at >= s))
        .collect();
    if let Some(n) = o.tail_lines {
        let n = usize::try_from(n).unwrap_or(0);
        chosen = chosen.split_off(chosen.len().saturating_sub(n));
    }
    let mut out = String::new();
    for l in chosen {
        if o.timestamps {
            out.push_str(&format!("{} ", rfc3339_nano(l.at)));
        }
        out.push_str(&l.text);
    }
    out
}

/// Go's `time.RFC3339Nano` as the kubelet stamps log lines (trailing zeros dropped).
fn rfc3339_nano(t: Timestamp) -> String {
    let base = t.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.subsec_nanosecond();
    if nanos == 0 {
        format!("{base}Z")
    } else {
        let frac = format!("{nanos:09}");
        format!("{base}.{}Z", frac.trim_end_matches('0'))
    }
}

fn text_response(body: Body) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

impl ApiServer {
    /// The pod as the watch cache has it, decoded.
    pub(crate) async fn pod_for_stream(&self, t: &Target) -> ApiResult<Pod> {
        let name = t.name()?;
        self.sync_cache().await?;
        let entry = self
            .cache
            .get(&t.def, t.namespace.as_deref(), name)
            .ok_or_else(|| ApiError::not_found(&t.def, name))?;
        let value: Value = entry.value();
        serde_json::from_value(value)
            .map_err(|e| ApiError::internal(format!("decoding pod {name}: {e}")))
    }

    /// GET `pods/NAME/log`.
    pub(crate) async fn pod_log(&self, t: &Target, p: &Params) -> ApiResult<Response> {
        let name = t.name()?.to_string();
        let o = Options::from(p, &name)?;
        let pod = self.pod_for_stream(t).await?;
        let container = container_of(&pod, o.container.as_deref())?.clone();
        // Upstream's LogLocation gives no location for an unscheduled pod: an empty answer.
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
        {
            return Ok(text_response(Body::empty()));
        }
        let (started, finished) = run_times(&pod, &container.name, o.previous)?;
        let lines = printed_lines(&pod, &container, started);
        let now = clock::now();
        let seen_until = finished.unwrap_or(now).min(now);
        let (past, future): (Vec<Line>, Vec<Line>) =
            lines.into_iter().partition(|l| l.at <= seen_until);
        let mut head = render(&past, &o);
        let mut budget = o
            .limit_bytes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if let Some(b) = budget {
            truncate_bytes(&mut head, b);
            budget = Some(b - head.len());
        }
        let follows = o.follow && finished.is_none() && budget != Some(0);
        if !follows {
            return Ok(text_response(Body::from(head)));
        }
        // Following a running container: the lines still to come as their time arrives, until
        // the container stops (the node reports another state, or the pod goes) or the client
        // goes away (the body is dropped).
        let server = self.clone();
        let target = t.clone();
        let uid = pod.metadata.uid.clone();
        let container_name = container.name.clone();
        let stamp = Options {
            since: None,
            tail_lines: None,
            ..o.clone()
        };
        let state = Follow {
            head: Some(head),
            future: future.into(),
            budget,
            started,
        };
        let stream = futures::stream::unfold(state, move |mut st| {
            let server = server.clone();
            let target = target.clone();
            let uid = uid.clone();
            let container_name = container_name.clone();
            let stamp = stamp.clone();
            async move {
                if let Some(h) = st.head.take() {
                    return Some((Ok::<_, std::io::Error>(bytes::Bytes::from(h)), st));
                }
                loop {
                    if st.budget == Some(0) {
                        return None;
                    }
                    let now = clock::now();
                    if let Some(next) = st.future.front()
                        && next.at <= now
                    {
                        let mut chunk = render(std::slice::from_ref(next), &stamp);
                        st.future.pop_front();
                        if let Some(b) = st.budget {
                            truncate_bytes(&mut chunk, b);
                            st.budget = Some(b - chunk.len());
                        }
                        return Some((Ok(bytes::Bytes::from(chunk)), st));
                    }
                    if !server.still_running(&target, uid.as_deref(), &container_name, st.started) {
                        return None;
                    }
                    let wait = st
                        .future
                        .front()
                        .and_then(|l| Duration::try_from(l.at.duration_since(now)).ok())
                        .map_or(FOLLOW_POLL, |d| d.min(FOLLOW_POLL));
                    tokio::time::sleep(wait).await;
                }
            }
        });
        Ok(text_response(Body::from_stream(stream)))
    }

    /// Whether the run of `container` that started at `started` is still the running one.
    fn still_running(
        &self,
        t: &Target,
        uid: Option<&str>,
        container: &str,
        started: Timestamp,
    ) -> bool {
        let Ok(name) = t.name() else { return false };
        let Some(entry) = self.cache.get(&t.def, t.namespace.as_deref(), name) else {
            return false;
        };
        let Ok(pod) = serde_json::from_value::<Pod>(entry.value()) else {
            return false;
        };
        if pod.metadata.uid.as_deref() != uid {
            return false;
        }
        status_of(&pod, container)
            .and_then(|s| s.state.as_ref())
            .and_then(|s| s.running.as_ref())
            .is_some_and(|r| r.started_at.as_ref().map(|t| t.0) == Some(started))
    }
}

/// What a follow stream still has to send.
struct Follow {
    head: Option<String>,
    future: std::collections::VecDeque<Line>,
    budget: Option<usize>,
    started: Timestamp,
}

/// Cuts `s` to at most `limit` bytes (on a character boundary).
fn truncate_bytes(s: &mut String, limit: usize) {
    if s.len() > limit {
        let mut end = limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(command: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": command}]},
        }))
        .unwrap()
    }

    #[test]
    fn lines_join_pieces_and_keep_their_times() {
        let p = pod(json!(["sh", "-c", "echo -n a; echo b; sleep 2; echo c"]));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let lines = printed_lines(&p, c, t0);
        assert_eq!(
            lines,
            [
                Line {
                    at: t0,
                    text: "ab\n".into()
                },
                Line {
                    at: t0 + SignedDuration::from_secs(2),
                    text: "c\n".into()
                },
            ]
        );
        let o = Options {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(&lines, &o), "2024-01-01T00:00:02Z c\n");
    }
}
