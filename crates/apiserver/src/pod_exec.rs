//! `pods/exec` for simulated nodes. A simulated node has no container runtime, so no command can
//! run in its containers: the answer is the one a kubelet gives for a container whose image has
//! no such program (a distroless image asked for `sh`), the runtime's "executable file not found"
//! as an InternalError, after upstream's own checks (`streamLocation`: the container, a node
//! assigned). Upstream reports that error on the stream's error channel after the upgrade; with
//! no stream to run, it is the answer to the request itself, which kubectl prints the same way
//! (`error: Internal error occurred: ...`). The server never dials a node.

use crate::{
    error::{ApiError, ApiResult},
    pod_log::{container_of, status_of},
    request::{Params, Target},
    state::ApiServer,
};
use axum::response::Response;

impl ApiServer {
    /// GET or POST `pods/NAME/exec`.
    pub(crate) async fn pod_exec(&self, t: &Target, p: &Params) -> ApiResult<Response> {
        let name = t.name()?.to_string();
        let pod = self.pod_for_stream(t).await?;
        let container = container_of(&pod, p.container.as_deref().filter(|c| !c.is_empty()))?;
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "pod {name} does not have a host assigned"
            )));
        }
        let running = status_of(&pod, &container.name)
            .and_then(|s| s.state.as_ref())
            .is_some_and(|s| s.running.is_some());
        // The kubelet's `findContainer`: only a running container can be exec'd into.
        if !running {
            return Err(ApiError::internal(format!(
                "container not found (\"{}\")",
                container.name
            )));
        }
        let program = p.command.as_deref().unwrap_or_default();
        let id = status_of(&pod, &container.name)
            .and_then(|s| s.container_id.as_deref())
            .map(|id| id.rsplit("://").next().unwrap_or(id).to_string())
            .unwrap_or_default();
        Err(ApiError::internal(format!(
            "error executing command in container: failed to exec in container: failed to start exec \"{id}\": OCI runtime exec failed: exec failed: unable to start container process: exec: \"{program}\": executable file not found in $PATH: unknown"
        )))
    }
}
