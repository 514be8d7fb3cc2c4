//! One pod's life on a simulated kubelet, as a state machine over plain data: containers pull,
//! start, become ready, crash and restart with back-off, are killed on deletion or restarted in
//! place when their image changes. [`PodSim::advance`] runs whatever is due and reports the
//! events to record; [`PodSim::status`] renders the `status` the kubelet would post.

use crate::{
    command::{Files, Program, Run},
    config::NodeSim,
    distribution::{Distribution, format_go},
    image,
    mounts::{self, Need, Objects},
    node::time,
    probe::{ProbeKind, Probes, Running, Window},
    profile::{
        Chosen, EXIT_CODE_ANNOTATION, FAULT_ANNOTATION, Fault, KILLED_EXIT_CODE, PodFacts, Profile,
    },
    resync::Reported,
};
use events::EventType;
use k8s_openapi::api::core::v1::{Container, Pod};
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};
use std::{borrow::Cow, collections::HashSet, net::Ipv4Addr, sync::Arc, time::Duration};
use tokio::time::Instant;

/// Upstream's crash-loop and image-pull back-off: 10s doubling to 5 minutes.
const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// How soon after `ErrImagePull` the kubelet reports `ImagePullBackOff` (its next sync).
const PULL_RESYNC: Duration = Duration::from_secs(1);
/// A failing readiness probe is reported once per period.
const PROBE_PERIOD: Duration = Duration::from_secs(10);

/// The back-off before the `n`th wait (0-based): 10s, 20s, 40s, ... at most 5 minutes.
pub fn backoff(n: u32) -> Duration {
    BACKOFF_INITIAL
        .saturating_mul(1u32.checked_shl(n.min(16)).unwrap_or(u32::MAX))
        .min(BACKOFF_MAX)
}

/// A container as the spec describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSpec {
    /// Its name.
    pub name: String,
    /// Its image as written.
    pub image: String,
    /// `imagePullPolicy`, defaulted as upstream.
    pub pull_policy: String,
    /// An init container with `restartPolicy: Always` (a sidecar): it keeps running.
    pub sidecar: bool,
    /// What its command says about each run, if it says anything (shared: a pod's spec is
    /// read again on every change).
    pub program: Option<Arc<Program>>,
    /// Its probes, if it has any.
    pub probes: Option<Arc<Probes>>,
    /// The certificate generator it runs, if it runs one (see `crate::certgen`): its run's end
    /// is what the tool's requests come to.
    pub tool: Option<Arc<crate::certgen::Tool>>,
}

impl ContainerSpec {
    fn from(c: &Container, pod: &Pod) -> Self {
        let image = c.image.clone().unwrap_or_default();
        let pull_policy = c
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| image::default_pull_policy(&image).to_string());
        ContainerSpec {
            name: c.name.clone(),
            image,
            pull_policy,
            sidecar: c.restart_policy.as_deref() == Some("Always"),
            program: Program::of(c, pod).map(Arc::new),
            probes: Probes::of(c).map(Arc::new),
            tool: crate::certgen::Tool::of(c, pod).map(Arc::new),
        }
    }
}

/// What the simulation needs of a Pod object; the rest is dropped, so 100,000 pods stay small.
#[derive(Clone, Debug)]
pub struct PodView {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// The node it is bound to.
    pub node: String,
    /// Init containers.
    pub init: Vec<ContainerSpec>,
    /// Containers.
    pub containers: Vec<ContainerSpec>,
    /// `Always`, `OnFailure` or `Never`.
    pub restart_policy: String,
    /// `deletionGracePeriodSeconds` once `deletionTimestamp` is set.
    pub deletion_grace: Option<i64>,
    /// Labels (for fault rules).
    pub labels: std::collections::BTreeMap<String, String>,
    /// The `rollwright.io/fault` annotation.
    pub fault_annotation: Option<String>,
    /// The `rollwright.io/exit-code` annotation, if it holds an integer.
    pub exit_code: Option<i32>,
    /// The scheduler's `PodScheduled` condition, kept in every status we write.
    pub scheduled: Option<Value>,
    /// The stored status, for adopting a pod this process did not start.
    pub status: Option<Value>,
    /// The PersistentVolumeClaims it mounts (it starts once they are bound).
    pub claims: Vec<String>,
    /// Its ServiceAccount.
    pub service_account: String,
    /// Its projected volumes' ServiceAccount token sources (requested when it starts).
    pub tokens: Vec<crate::tokens::TokenSource>,
    /// The Secrets and ConfigMaps its volumes cannot be set up without.
    pub mounts: Vec<Need>,
    /// `hostNetwork: true`: it uses its node's IP.
    pub host_network: bool,
}

impl PodView {
    /// Extracts the view; `None` for pods without a node or a UID.
    pub fn from_pod(pod: &Pod) -> Option<PodView> {
        let spec = pod.spec.as_ref()?;
        let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let scheduled = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .and_then(|c| serde_json::to_value(c).ok());
        let deletion_grace = meta
            .deletion_timestamp
            .as_ref()
            .map(|_| meta.deletion_grace_period_seconds.unwrap_or(0));
        Some(PodView {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
            node,
            init: spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| ContainerSpec::from(c, pod))
                .collect(),
            containers: spec
                .containers
                .iter()
                .map(|c| ContainerSpec::from(c, pod))
                .collect(),
            restart_policy: spec
                .restart_policy
                .clone()
                .unwrap_or_else(|| "Always".into()),
            deletion_grace,
            labels: meta.labels.clone().unwrap_or_default(),
            fault_annotation: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(FAULT_ANNOTATION))
                .cloned(),
            exit_code: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXIT_CODE_ANNOTATION))
                .and_then(|v| v.trim().parse().ok()),
            scheduled,
            status: status.and_then(|s| serde_json::to_value(s).ok()),
            claims: spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone())
                .collect(),
            service_account: spec
                .service_account_name
                .clone()
                .unwrap_or_else(|| "default".into()),
            tokens: crate::tokens::sources(pod),
            mounts: mounts::needs(pod),
            host_network: spec.host_network == Some(true),
        })
    }

    fn facts(&self) -> (Vec<&str>, PodFacts<'_>) {
        let images: Vec<&str> = self
            .init
            .iter()
            .chain(&self.containers)
            .map(|c| c.image.as_str())
            .collect();
        let facts = PodFacts {
            namespace: &self.namespace,
            labels: Some(&self.labels),
            fault_annotation: self.fault_annotation.as_deref(),
            node: &self.node,
            images: &[],
        };
        (images, facts)
    }
}

/// Something the kubelet would record about the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEvent {
    /// `spec.containers{app}` for container events.
    pub field_path: Option<String>,
    /// Normal or Warning.
    pub kind: EventType,
    /// Upstream's reason.
    pub reason: Cow<'static, str>,
    /// Upstream's message.
    pub message: String,
}

/// What advancing a pod asks of the engine.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Events to record.
    pub events: Vec<PodEvent>,
    /// The status changed and should be written.
    pub status_changed: bool,
    /// Containers are gone: write the final status and delete the pod (grace 0, UID precondition).
    pub finish: bool,
    /// Certificate generators that started: the engine runs each and reports its exit.
    pub tools: Vec<ToolStart>,
}

/// A container that started running a certificate generator.
#[derive(Clone, Debug)]
pub struct ToolStart {
    /// An init container?
    pub init: bool,
    /// Its index among the pod's (init) containers.
    pub index: usize,
    /// The run's container ID (a later run is another).
    pub container_id: String,
    /// The tool.
    pub tool: Arc<crate::certgen::Tool>,
}

/// What advancing needs from the outside: settings, delays, the node's pulled images, the time.
pub struct Ctx<'a> {
    /// Settings (scales).
    pub cfg: &'a NodeSim,
    /// The profile (for faults chosen again after an image change).
    pub profile: &'a Profile,
    /// Start delay in effect (the profile's, else the config's).
    pub start_delay: &'a Distribution,
    /// Readiness delay in effect.
    pub readiness_delay: &'a Distribution,
    /// Images already on the pod's node.
    pub node_images: &'a mut HashSet<String>,
    /// Files containers made under the node's host paths (see [`crate::command`]).
    pub node_files: &'a mut HashSet<String>,
    /// The Secrets and ConfigMaps that exist, for mounting volumes.
    pub objects: &'a Objects,
    /// Monotonic now, for timers.
    pub now: Instant,
    /// Wall-clock now, for status fields.
    pub wall: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Pull (or fail to), create and start the container.
    Start,
    /// Report `ImagePullBackOff` after an `ErrImagePull`.
    PullBackOff,
    /// The container's process exits.
    Exit,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Terminated {
    exit_code: i32,
    reason: &'static str,
    started: String,
    finished: String,
    container_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Waiting {
        reason: &'static str,
        message: Option<String>,
    },
    Running {
        since: String,
    },
    Terminated(Terminated),
}

#[derive(Clone, Debug)]
struct Ctr {
    spec: ContainerSpec,
    init: bool,
    fault: Option<Fault>,
    state: State,
    last: Option<Terminated>,
    restarts: i32,
    ready: bool,
    started: bool,
    image_id: String,
    container_id: Option<String>,
    step: Option<(Instant, Step)>,
    ready_at: Option<Instant>,
    pull_failures: u32,
    crashes: u32,
    /// How long the pending pull takes (drawn with the start delay).
    pull_took: Duration,
    /// The exit code of the current run of a run-to-completion container.
    planned_exit: i32,
    /// The probes of the current run (boxed: most containers have none).
    probes: Option<Box<Running>>,
}

impl Ctr {
    fn new(spec: ContainerSpec, init: bool, fault: Option<Fault>, waiting: &'static str) -> Ctr {
        Ctr {
            spec,
            init,
            fault,
            state: State::Waiting {
                reason: waiting,
                message: None,
            },
            last: None,
            restarts: 0,
            ready: false,
            started: false,
            image_id: String::new(),
            container_id: None,
            step: None,
            ready_at: None,
            pull_failures: 0,
            crashes: 0,
            pull_took: Duration::ZERO,
            planned_exit: 0,
            probes: None,
        }
    }

    /// Nothing more is due for this run: no step, no readiness, no probe.
    fn halt(&mut self) {
        self.step = None;
        self.ready_at = None;
        self.probes = None;
    }

    /// The fault window a probe failure gives a run started at `at`, drawn from `rng`.
    fn probe_window(&self, at: Instant, rng: &mut StdRng) -> Option<(ProbeKind, Window)> {
        let Some(Fault::ProbeFailure {
            probe,
            after,
            duration,
            ..
        }) = &self.fault
        else {
            return None;
        };
        let from = at + after.sample(rng);
        let until = duration.as_ref().map(|d| from + d.sample(rng));
        Some((*probe, Window { from, until }))
    }

    fn field_path(&self) -> String {
        let list = if self.init {
            "initContainers"
        } else {
            "containers"
        };
        format!("spec.{list}{{{}}}", self.spec.name)
    }

    fn is_running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn exit_code(&self) -> Option<i32> {
        match &self.state {
            State::Terminated(t) => Some(t.exit_code),
            _ => None,
        }
    }

    /// Init containers are done when they exited 0; sidecars once started.
    fn init_done(&self) -> bool {
        if self.spec.sidecar {
            // A sidecar with a startup probe lets the next init container start once it passes.
            self.container_id.is_some()
                && (self.started
                    || self
                        .spec
                        .probes
                        .as_ref()
                        .is_none_or(|p| p.startup.is_none()))
        } else {
            self.exit_code() == Some(0)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Cond {
    status: bool,
    reason: Option<&'static str>,
    message: Option<String>,
    since: String,
}

/// `Pending`, `Running`, `Succeeded`, `Failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not all containers have started.
    Pending,
    /// Bound and containers started.
    Running,
    /// All containers exited 0 and will not restart.
    Succeeded,
    /// A container failed and will not restart, or the pod was failed.
    Failed,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    /// Whether the pod is done for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// One simulated pod.
pub struct PodSim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its node.
    pub node: String,
    /// Its IP, once it has a sandbox (its node's with `hostNetwork`).
    pub ip: Option<Ipv4Addr>,
    /// `hostNetwork: true`: its IP is its node's, not one of the node's pod range.
    pub host_network: bool,
    host_ip: Ipv4Addr,
    /// Volumes that could not be set up yet; its containers wait for them.
    mounting: Option<Box<Mounting>>,
    restart_policy: String,
    rng: StdRng,
    chosen: Option<Chosen>,
    /// Labels, for choosing a fault again when the spec changes (rare: a map is rebuilt then).
    /// Pairs rather than a `BTreeMap`, whose first node alone takes half a kilobyte per pod.
    facts_labels: Box<[(Box<str>, Box<str>)]>,
    fault_annotation: Option<String>,
    exit_override: Option<i32>,
    /// The scheduler's `PodScheduled` condition as JSON text: parsed when a status is written,
    /// as a `Value` it would keep a map and its strings per pod for the pod's lifetime.
    scheduled: Option<Box<str>>,
    start_time: String,
    phase: Phase,
    reason: Option<String>,
    message: Option<String>,
    init: Vec<Ctr>,
    containers: Vec<Ctr>,
    sandbox: Cond,
    initialized: Cond,
    containers_ready: Cond,
    ready: Cond,
    fail_at: Option<Instant>,
    deleting: Option<(Instant, i64)>,
    /// Files its containers' commands made in its `emptyDir` volumes; boxed and made on first
    /// use, as most pods have no command the simulator runs.
    #[allow(
        clippy::box_collection,
        reason = "8 bytes per pod instead of a 48-byte empty set in every one"
    )]
    files: Option<Box<HashSet<String>>>,
    /// Containers stopped after deletion; only the delete remains.
    pub finished: bool,
    /// The `Ready` conditions written for it and seen on the server, to write ours back when
    /// someone else changes it.
    pub reported: Reported,
}

/// A JSON value as compact text.
fn compact(v: &Value) -> Box<str> {
    v.to_string().into_boxed_str()
}

/// A pod's volumes that wait for Secrets or ConfigMaps.
#[derive(Debug)]
struct Mounting {
    needs: Vec<Need>,
    /// Failed attempts so far.
    failures: u32,
    /// The next attempt.
    at: Instant,
}

/// While the simulator does not know yet which objects exist, attempts wait this long.
const MOUNT_UNKNOWN_RETRY: Duration = Duration::from_millis(200);

fn unready_message(prefix: &str, names: &[&str]) -> String {
    format!("{prefix} [{}]", names.join(" "))
}

impl PodSim {
    /// A pod the kubelet just admitted: containers wait, the first start is scheduled. `rng` is
    /// the pod's seeded RNG; the fault is chosen from it.
    pub fn new(
        view: &PodView,
        ip: Option<Ipv4Addr>,
        host_ip: Ipv4Addr,
        mut rng: StdRng,
        ctx: &mut Ctx<'_>,
    ) -> PodSim {
        let (images, facts) = view.facts();
        let chosen = ctx.profile.choose(
            &PodFacts {
                images: &images,
                ..facts
            },
            &mut rng,
        );
        let ctr_fault = |c: &ContainerSpec| {
            chosen
                .as_ref()
                .filter(|ch| ch.fault.is_container_fault() && ch.affects(&c.image))
                .map(|ch| ch.fault.clone())
        };
        let app_waiting = if view.init.is_empty() {
            "ContainerCreating"
        } else {
            "PodInitializing"
        };
        let init: Vec<Ctr> = view
            .init
            .iter()
            .map(|c| Ctr::new(c.clone(), true, ctr_fault(c), "PodInitializing"))
            .collect();
        let containers: Vec<Ctr> = view
            .containers
            .iter()
            .map(|c| Ctr::new(c.clone(), false, ctr_fault(c), app_waiting))
            .collect();
        let wall = ctx.wall.clone();
        let cond = |status: bool| Cond {
            status,
            reason: None,
            message: None,
            since: wall.clone(),
        };
        let mut pod = PodSim {
            namespace: view.namespace.clone(),
            name: view.name.clone(),
            uid: view.uid.clone(),
            node: view.node.clone(),
            ip,
            host_network: view.host_network,
            host_ip,
            mounting: None,
            restart_policy: view.restart_policy.clone(),
            rng,
            chosen,
            facts_labels: view
                .labels
                .iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                .collect(),
            fault_annotation: view.fault_annotation.clone(),
            exit_override: view.exit_code,
            scheduled: view.scheduled.as_ref().map(compact),
            start_time: wall.clone(),
            phase: Phase::Pending,
            reason: None,
            message: None,
            init,
            containers,
            sandbox: cond(true),
            initialized: cond(false),
            containers_ready: cond(false),
            ready: cond(false),
            fail_at: None,
            deleting: None,
            files: None,
            finished: false,
            reported: Reported::default(),
        };
        if !pod.adopt(view) {
            if view.mounts.is_empty() {
                pod.begin(ctx);
            } else {
                // The kubelet sets the volumes up before it creates the sandbox: the first
                // attempt is due now, made by the `advance` that follows admission.
                pod.mounting = Some(Box::new(Mounting {
                    needs: view.mounts.clone(),
                    failures: 0,
                    at: ctx.now,
                }));
                pod.sandbox.status = false;
            }
        } else {
            // A container that ran but was not ready yet when this process restarted is probed
            // again, as a kubelet keeps probing it: it becomes ready after the readiness delay
            // (found by `rollwright chaos`: such pods stayed unready for ever).
            for c in pod
                .containers
                .iter_mut()
                .filter(|c| c.is_running() && !c.ready)
            {
                c.ready_at = Some(ctx.now + ctx.readiness_delay.sample(&mut pod.rng));
            }
            // A run-to-completion container this process did not start runs its time again.
            for i in 0..pod.containers.len() {
                if pod.containers[i].is_running() {
                    pod.plan_completion(i, ctx);
                }
            }
            // Its probes start again, as a restarted kubelet's workers do; a ready container
            // stays ready until they say otherwise.
            for i in 0..pod.containers.len() {
                if pod.containers[i].is_running() && pod.containers[i].spec.probes.is_some() {
                    let started = pod.containers[i].started;
                    pod.containers[i].ready_at = None;
                    let ready_in = ctx.readiness_delay.sample(&mut pod.rng);
                    pod.start_probes(false, i, started, ready_in, ctx);
                }
            }
        }
        pod.refresh(&ctx.wall);
        pod
    }

    /// Takes over a pod that already runs (this process restarted): its running containers keep
    /// running, so nothing restarts and no event is repeated. Returns false to start afresh.
    fn adopt(&mut self, view: &PodView) -> bool {
        let Some(status) = &view.status else {
            return false;
        };
        let phase = status.get("phase").and_then(Value::as_str).unwrap_or("");
        if let Some(t) = status.get("startTime").and_then(Value::as_str) {
            self.start_time = t.to_string();
        }
        if matches!(phase, "Succeeded" | "Failed") {
            self.phase = if phase == "Succeeded" {
                Phase::Succeeded
            } else {
                Phase::Failed
            };
            self.reason = status
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.message = status
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string);
            for c in self.init.iter_mut().chain(self.containers.iter_mut()) {
                c.state = State::Terminated(Terminated {
                    exit_code: if phase == "Succeeded" { 0 } else { 1 },
                    reason: if phase == "Succeeded" {
                        "Completed"
                    } else {
                        "Error"
                    },
                    started: self.start_time.clone(),
                    finished: self.start_time.clone(),
                    container_id: None,
                });
            }
            return true;
        }
        if phase != "Running" {
            return false;
        }
        let statuses = status
            .get("containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let all_running = self.containers.iter().all(|c| {
            statuses.iter().any(|s| {
                s.get("name").and_then(Value::as_str) == Some(c.spec.name.as_str())
                    && s.pointer("/state/running").is_some()
            })
        });
        if !all_running || self.containers.iter().any(|c| c.fault.is_some()) {
            return false;
        }
        for c in self.init.iter_mut() {
            c.state = State::Terminated(Terminated {
                exit_code: 0,
                reason: "Completed",
                started: self.start_time.clone(),
                finished: self.start_time.clone(),
                container_id: None,
            });
            c.container_id = Some(image::container_id(&self.uid, &c.spec.name, 0));
        }
        for c in self.containers.iter_mut() {
            let Some(s) = statuses
                .iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(c.spec.name.as_str()))
            else {
                continue;
            };
            let since = s
                .pointer("/state/running/startedAt")
                .and_then(Value::as_str)
                .unwrap_or(&self.start_time);
            c.state = State::Running {
                since: since.to_string(),
            };
            c.started = true;
            c.ready = s.get("ready").and_then(Value::as_bool).unwrap_or(false);
            c.restarts = s.get("restartCount").and_then(Value::as_i64).unwrap_or(0) as i32;
            c.container_id = s
                .get("containerID")
                .and_then(Value::as_str)
                .map(str::to_string);
            c.image_id = image::image_id(&c.spec.image);
        }
        self.ip = status
            .get("podIP")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .or(self.ip);
        true
    }

    /// When the pod next needs attention.
    pub fn wake(&self) -> Option<Instant> {
        let ctrs = self.init.iter().chain(&self.containers);
        let steps = ctrs
            .flat_map(|c| {
                let probe = c
                    .probes
                    .as_ref()
                    .and_then(|p| p.due().map(|(t, _)| t).min());
                [c.step.map(|(t, _)| t), c.ready_at, probe]
            })
            .flatten();
        steps
            .chain(self.fail_at)
            .chain(self.deleting.map(|(t, _)| t))
            .chain(
                self.mounting
                    .as_ref()
                    .filter(|_| self.deleting.is_none())
                    .map(|m| m.at),
            )
            .min()
    }

    /// Schedules the first container's start (the first init container's, else every app
    /// container's), its volumes being set up.
    fn begin(&mut self, ctx: &mut Ctx<'_>) {
        let delay = self.start_delay(ctx);
        match self.init.first_mut() {
            Some(first) => {
                first.step = Some((ctx.now + delay, Step::Start));
                first.pull_took = delay;
            }
            None => self.schedule_app_starts(ctx.now, delay),
        }
    }

    /// Tries to set up the volumes that wait for Secrets or ConfigMaps: each that still cannot
    /// be is a `FailedMount` warning, tried again after the back-off; once all can, the sandbox
    /// is made and the containers start.
    fn mount(&mut self, ctx: &mut Ctx<'_>, out: &mut Outcome) {
        let Some(m) = self.mounting.as_mut() else {
            return;
        };
        if !ctx.objects.known() {
            m.at = ctx.now + MOUNT_UNKNOWN_RETRY;
            return;
        }
        let failures = ctx.objects.failures(&self.namespace, &m.needs);
        if failures.is_empty() {
            self.mounting = None;
            self.sandbox.status = true;
            self.sandbox.since = ctx.wall.clone();
            self.begin(ctx);
            return;
        }
        m.failures += 1;
        m.at = ctx.now + ctx.cfg.backoff(mounts::retry_after(m.failures));
        out.events
            .extend(failures.into_iter().map(|message| PodEvent {
                field_path: None,
                kind: EventType::Warning,
                reason: "FailedMount".into(),
                message,
            }));
    }

    /// The pod's phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether the pod is Ready.
    pub fn is_ready(&self) -> bool {
        self.ready.status
    }

    fn start_delay(&mut self, ctx: &Ctx<'_>) -> Duration {
        let mut d = ctx.start_delay.sample(&mut self.rng);
        if let Some(Chosen {
            fault: Fault::SlowStart { delay },
            ..
        }) = &self.chosen
        {
            d += delay.sample(&mut self.rng);
        }
        d
    }

    /// Whether the pod's containers run to completion (`restartPolicy: Never|OnFailure`) rather
    /// than until deleted.
    fn runs_to_completion(&self) -> bool {
        self.restart_policy != "Always"
    }

    /// Runs the program of container `i` (an init container if `init`) for its next run:
    /// `None` if it has none or the simulator cannot interpret it (logged: the container then
    /// runs as the profile says).
    fn program_run(&mut self, init: bool, i: usize, ctx: &mut Ctx<'_>) -> Option<Run> {
        let c = if init {
            &self.init[i]
        } else {
            &self.containers[i]
        };
        let program = c.spec.program.clone()?;
        let pod_files = self.files.get_or_insert_with(Default::default);
        let files = Files {
            pod: pod_files,
            node: ctx.node_files,
        };
        match program.run(files, &mut self.rng) {
            Ok(run) => Some(run),
            Err(why) => {
                tracing::debug!(
                    pod = %format!("{}/{}", self.namespace, self.name),
                    container = %c.spec.name,
                    command = ?program.argv(),
                    %why,
                    "command not interpreted; the profile decides its run"
                );
                None
            }
        }
    }

    /// Schedules the exit of app container `i` of a run-to-completion pod. How long it runs:
    /// the profile's `runFor` if it sets one, else what the container's command says (which
    /// may be for ever), else [`crate::profile::DEFAULT_RUN_FOR`]. Its exit code: the exit-code
    /// annotation, else a failure the profile's probability draws, else the command's, else 0.
    /// A crash-loop fault keeps its own timing and code.
    fn plan_completion(&mut self, i: usize, ctx: &mut Ctx<'_>) {
        if !self.runs_to_completion()
            || matches!(self.containers[i].fault, Some(Fault::CrashLoop { .. }))
        {
            return;
        }
        let stated = self.program_run(false, i, ctx);
        let run = match (ctx.profile.run_for_override(&mut self.rng), stated) {
            (Some(d), _) => Some(d),
            (None, Some(Run::Exits { after, .. })) => Some(after),
            (None, Some(Run::Forever)) => None,
            (None, None) => Some(ctx.profile.run_for(&mut self.rng)),
        };
        let stated_code = match stated {
            Some(Run::Exits { code, .. }) => Some(code),
            _ => None,
        };
        let code = ctx
            .profile
            .run_exit_code(self.exit_override, stated_code, &mut self.rng);
        let c = &mut self.containers[i];
        c.planned_exit = code;
        c.step = run.map(|run| (ctx.now + run, Step::Exit));
    }

    fn schedule_app_starts(&mut self, now: Instant, delay: Duration) {
        for c in &mut self.containers {
            c.state = State::Waiting {
                reason: "ContainerCreating",
                message: None,
            };
            c.step = Some((now + delay, Step::Start));
            c.pull_took = delay;
        }
    }

    /// Runs everything due by `ctx.now`.
    pub fn advance(&mut self, ctx: &mut Ctx<'_>) -> Outcome {
        let mut out = Outcome::default();
        let before = self.status(&ctx.wall);
        if self.finished {
            return out;
        }
        if let Some((deadline, _)) = self.deleting
            && deadline <= ctx.now
        {
            self.stop_all(&ctx.wall);
            self.deleting = None;
            self.finished = true;
            out.finish = true;
            self.refresh(&ctx.wall);
            return out;
        }
        if self.fail_at.is_some_and(|t| t <= ctx.now) {
            self.fail(ctx, &mut out);
        }
        if self.deleting.is_none() && self.mounting.as_ref().is_some_and(|m| m.at <= ctx.now) {
            self.mount(ctx, &mut out);
        }
        // Steps may schedule more steps due now (zero delays): run until nothing is due.
        for _ in 0..1000 {
            let due = self.next_due(ctx.now);
            let Some((init, i, what)) = due else { break };
            match what {
                Due::Step(step) => self.run_step(init, i, step, ctx, &mut out),
                Due::Ready => self.run_ready(init, i, ctx, &mut out),
                Due::Probe(kind) => self.run_probe(init, i, kind, ctx, &mut out),
            }
        }
        self.refresh(&ctx.wall);
        if self.phase.is_terminal() && self.init.iter().any(Ctr::is_running) {
            // Sidecars stop once the pod's work is done, as upstream's kubelet stops them.
            for c in self.init.iter_mut().filter(|c| c.is_running()) {
                c.halt();
                c.ready = false;
                c.started = false;
                if let State::Running { since } = &c.state {
                    c.state = State::Terminated(Terminated {
                        exit_code: 0,
                        reason: "Completed",
                        started: since.clone(),
                        finished: ctx.wall.clone(),
                        container_id: c.container_id.clone(),
                    });
                }
            }
            self.refresh(&ctx.wall);
        }
        out.status_changed = self.status(&ctx.wall) != before;
        out
    }

    fn next_due(&self, now: Instant) -> Option<(bool, usize, Due)> {
        let mut best: Option<(Instant, bool, usize, Due)> = None;
        for (init, list) in [(true, &self.init), (false, &self.containers)] {
            for (i, c) in list.iter().enumerate() {
                let cands = [
                    c.step.map(|(t, s)| (t, Due::Step(s))),
                    c.ready_at.map(|t| (t, Due::Ready)),
                ];
                let probes = c
                    .probes
                    .iter()
                    .flat_map(|p| p.due())
                    .map(|(t, k)| (t, Due::Probe(k)));
                for (t, d) in cands.into_iter().flatten().chain(probes) {
                    if t <= now && best.as_ref().is_none_or(|b| t < b.0) {
                        best = Some((t, init, i, d));
                    }
                }
            }
        }
        best.map(|(_, init, i, d)| (init, i, d))
    }

    fn ctr(&mut self, init: bool, i: usize) -> &mut Ctr {
        if init {
            &mut self.init[i]
        } else {
            &mut self.containers[i]
        }
    }

    fn run_step(&mut self, init: bool, i: usize, step: Step, ctx: &mut Ctx<'_>, out: &mut Outcome) {
        self.ctr(init, i).step = None;
        match step {
            Step::Start => self.start(init, i, ctx, out),
            Step::PullBackOff => {
                let c = self.ctr(init, i);
                let img = c.spec.image.clone();
                let err = pull_error(c);
                c.state = State::Waiting {
                    reason: "ImagePullBackOff",
                    message: Some(format!(
                        "Back-off pulling image \"{img}\": ErrImagePull: {err}"
                    )),
                };
                let wait = ctx.cfg.backoff(backoff(c.pull_failures.saturating_sub(1)));
                c.step = Some((ctx.now + wait, Step::Start));
                let path = Some(c.field_path());
                out.events.push(PodEvent {
                    field_path: path.clone(),
                    kind: EventType::Normal,
                    reason: "BackOff".into(),
                    message: format!("Back-off pulling image \"{img}\""),
                });
                out.events.push(PodEvent {
                    field_path: path,
                    kind: EventType::Warning,
                    reason: "Failed".into(),
                    message: "Error: ImagePullBackOff".into(),
                });
            }
            Step::Exit => self.exit(init, i, None, ctx, out),
        }
    }

    fn start(&mut self, init: bool, i: usize, ctx: &mut Ctx<'_>, out: &mut Outcome) {
        let pull_took = self.ctr(init, i).pull_took;
        let uid = self.uid.clone();
        let c = self.ctr(init, i);
        let img = c.spec.image.clone();
        let path = Some(c.field_path());
        let ev = |kind, reason: &'static str, message: String| PodEvent {
            field_path: path.clone(),
            kind,
            reason: reason.into(),
            message,
        };
        if let Some(Fault::ImagePullFailure { .. }) = c.fault {
            c.pull_failures += 1;
            let err = pull_error(c);
            c.state = State::Waiting {
                reason: "ErrImagePull",
                message: Some(err.clone()),
            };
            c.step = Some((ctx.now + ctx.cfg.backoff(PULL_RESYNC), Step::PullBackOff));
            out.events.push(ev(
                EventType::Normal,
                "Pulling",
                format!("Pulling image \"{img}\""),
            ));
            out.events.push(ev(
                EventType::Warning,
                "Failed",
                format!("Failed to pull image \"{img}\": {err}"),
            ));
            out.events.push(ev(
                EventType::Warning,
                "Failed",
                "Error: ErrImagePull".into(),
            ));
            return;
        }
        let present = ctx.node_images.contains(&img);
        if c.spec.pull_policy == "Always" || (!present && c.spec.pull_policy != "Never") {
            out.events.push(ev(
                EventType::Normal,
                "Pulling",
                format!("Pulling image \"{img}\""),
            ));
            let took = format_go(pull_took);
            out.events.push(ev(
                EventType::Normal,
                "Pulled",
                format!("Successfully pulled image \"{img}\" in {took} ({took} including waiting). Image size: {} bytes.", image::size(&img)),
            ));
            ctx.node_images.insert(img.clone());
        } else {
            out.events.push(ev(
                EventType::Normal,
                "Pulled",
                format!("Container image \"{img}\" already present on machine"),
            ));
        }
        let name = c.spec.name.clone();
        out.events.push(ev(
            EventType::Normal,
            "Created",
            format!("Created container: {name}"),
        ));
        out.events.push(ev(
            EventType::Normal,
            "Started",
            format!("Started container {name}"),
        ));
        if c.container_id.is_some() {
            c.restarts += 1;
        }
        c.container_id = Some(image::container_id(&uid, &name, c.restarts));
        c.image_id = image::image_id(&img);
        c.state = State::Running {
            since: ctx.wall.clone(),
        };
        c.started = true;
        c.ready = false;
        let fault = c.fault.clone();
        let sidecar = c.spec.sidecar;
        let ready_in = ctx.readiness_delay.sample(&mut self.rng);
        let tool = match (sidecar, &fault) {
            (false, None) => self.ctr(init, i).spec.tool.clone(),
            _ => None,
        };
        if let Some(tool) = tool {
            // It runs until its requests are done ([`PodSim::tool_exited`]).
            let c = self.ctr(init, i);
            out.tools.push(ToolStart {
                init,
                index: i,
                container_id: c.container_id.clone().unwrap_or_default(),
                tool,
            });
            if !init {
                c.ready_at = Some(ctx.now + ready_in);
            }
            return;
        }
        if init && !sidecar {
            // An init container runs to completion: as its command says, else the readiness
            // delay stands in for its work.
            match self.program_run(true, i, ctx) {
                Some(Run::Exits { after, code }) => {
                    let c = self.ctr(init, i);
                    c.planned_exit = code;
                    c.step = Some((ctx.now + after, Step::Exit));
                }
                Some(Run::Forever) => {}
                None => {
                    let c = self.ctr(init, i);
                    c.planned_exit = 0;
                    c.step = Some((ctx.now + ready_in, Step::Exit));
                }
            }
            return;
        }
        if self.ctr(init, i).spec.probes.is_some() {
            self.start_probes(init, i, false, ready_in, ctx);
        } else {
            self.ctr(init, i).ready_at = Some(ctx.now + ready_in);
        }
        if let Some(Fault::CrashLoop { after, .. }) = &fault {
            let run = after.sample(&mut self.rng);
            self.ctr(init, i).step = Some((ctx.now + run, Step::Exit));
        }
        if init && sidecar {
            if self.ctr(init, i).started {
                self.next_init(ctx);
            }
            return;
        }
        if !init {
            self.plan_completion(i, ctx);
        }
        if let (
            None,
            Some(Chosen {
                fault: Fault::FailAfter { after, .. },
                ..
            }),
        ) = (self.fail_at, &self.chosen)
        {
            let after = after.clone();
            self.fail_at = Some(ctx.now + after.sample(&mut self.rng));
        }
    }

    fn run_ready(&mut self, init: bool, i: usize, ctx: &mut Ctx<'_>, out: &mut Outcome) {
        let probe_period = ctx.cfg.backoff(PROBE_PERIOD);
        let c = self.ctr(init, i);
        c.ready_at = None;
        if !c.is_running() {
            return;
        }
        if let Some(Fault::NeverReady { message }) = &c.fault {
            out.events.push(PodEvent {
                field_path: Some(c.field_path()),
                kind: EventType::Warning,
                reason: "Unhealthy".into(),
                message: format!("Readiness probe failed: {message}"),
            });
            // Upstream probes again every period; the recorder folds repeats into a count.
            if !probe_period.is_zero() {
                c.ready_at = Some(ctx.now + probe_period);
            }
            return;
        }
        c.ready = true;
    }

    /// Starts the probes of container `i`'s run (`started`: it has started already, as an
    /// adopted container has); the readiness delay `ready_in` follows the probes' initial delay.
    fn start_probes(
        &mut self,
        init: bool,
        i: usize,
        started: bool,
        ready_in: Duration,
        ctx: &mut Ctx<'_>,
    ) {
        let scale = ctx.cfg.backoff_scale;
        let now = ctx.now;
        let c = if init {
            &mut self.init[i]
        } else {
            &mut self.containers[i]
        };
        let Some(spec) = c.spec.probes.clone() else {
            return;
        };
        let window = c.probe_window(now, &mut self.rng).or_else(|| {
            // `neverReady` on a container with a readiness probe: that probe always fails.
            matches!(c.fault, Some(Fault::NeverReady { .. })).then_some((
                ProbeKind::Readiness,
                Window {
                    from: now,
                    until: None,
                },
            ))
        });
        let mut run = Running::start(&spec, now, ready_in, scale, window);
        if started && run.startup.is_some() {
            run.started(&spec, now, ready_in, scale);
        }
        c.started = started || spec.startup.is_none();
        c.ready_at = None;
        if spec.readiness.is_none() && c.started && !c.ready {
            // No readiness probe: ready once started, after the readiness delay.
            c.ready_at = Some(now + ready_in);
        }
        c.probes = Some(Box::new(run));
    }

    /// Runs probe `kind` of container `i`: a failure is an `Unhealthy` warning; a flipped result
    /// makes the container ready or not, started, or killed.
    fn run_probe(
        &mut self,
        init: bool,
        i: usize,
        kind: ProbeKind,
        ctx: &mut Ctx<'_>,
        out: &mut Outcome,
    ) {
        let ip = self.ip;
        let scale = ctx.cfg.backoff_scale;
        let c = if init {
            &mut self.init[i]
        } else {
            &mut self.containers[i]
        };
        let Some(spec) = c.spec.probes.clone() else {
            return;
        };
        let field_path = c.field_path();
        let Some(run) = c.probes.as_mut() else {
            return;
        };
        let Some(prober) = run.get_mut(kind) else {
            return;
        };
        let r = prober.probe(ctx.now);
        let ok = prober.ok();
        if !r.passed {
            let message = match &c.fault {
                Some(Fault::ProbeFailure {
                    probe,
                    message: Some(m),
                    ..
                }) if *probe == kind => m.clone(),
                Some(Fault::NeverReady { message }) if kind == ProbeKind::Readiness => {
                    message.clone()
                }
                _ => spec
                    .get(kind)
                    .map(|s| s.failure_message(ip))
                    .unwrap_or_default(),
            };
            out.events.push(PodEvent {
                field_path: Some(field_path),
                kind: EventType::Warning,
                reason: "Unhealthy".into(),
                message: format!("{} probe failed: {message}", kind.label()),
            });
        }
        if !r.changed {
            return;
        }
        match (kind, ok) {
            (ProbeKind::Readiness, ok) => c.ready = ok,
            (ProbeKind::Startup, true) => {
                c.started = true;
                let ready_in = ctx.readiness_delay.sample(&mut self.rng);
                run.started(&spec, ctx.now, ready_in, scale);
                if spec.readiness.is_none() {
                    c.ready_at = Some(ctx.now + ready_in);
                }
                if init && c.spec.sidecar {
                    self.next_init(ctx);
                }
            }
            (ProbeKind::Startup | ProbeKind::Liveness, false) => self.kill(init, i, kind, ctx, out),
            (ProbeKind::Liveness, true) => {}
        }
    }

    /// The kubelet kills a container whose liveness or startup probe failed, and restarts it
    /// unless the pod never restarts (`computePodActions`).
    fn kill(
        &mut self,
        init: bool,
        i: usize,
        kind: ProbeKind,
        ctx: &mut Ctx<'_>,
        out: &mut Outcome,
    ) {
        let restart = self.restart_policy != "Never" || init;
        let c = self.ctr(init, i);
        let code = match &c.fault {
            Some(Fault::ProbeFailure { exit_code, .. }) => *exit_code,
            _ => KILLED_EXIT_CODE,
        };
        let mut message = format!("Container {} failed {} probe", c.spec.name, kind.lower());
        if restart {
            message.push_str(", will be restarted");
        }
        out.events.push(PodEvent {
            field_path: Some(c.field_path()),
            kind: EventType::Normal,
            reason: "Killing".into(),
            message,
        });
        c.halt();
        self.exit(init, i, Some(code), ctx, out);
    }

    /// Container `i` exits on its own, or `killed` by the kubelet with that exit code.
    fn exit(
        &mut self,
        init: bool,
        i: usize,
        killed: Option<i32>,
        ctx: &mut Ctx<'_>,
        out: &mut Outcome,
    ) {
        let policy = self.restart_policy.clone();
        let pod_ref = format!("{}_{}({})", self.name, self.namespace, self.uid);
        let c = self.ctr(init, i);
        let exit_code = match (killed, &c.fault) {
            (Some(code), _) => code,
            (None, Some(Fault::CrashLoop { exit_code, .. })) => *exit_code,
            _ => c.planned_exit,
        };
        let State::Running { since } = &c.state else {
            return;
        };
        let term = Terminated {
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" },
            started: since.clone(),
            finished: ctx.wall.clone(),
            container_id: c.container_id.clone(),
        };
        c.ready = false;
        c.started = false;
        c.ready_at = None;
        c.probes = None;
        if init && !c.spec.sidecar && exit_code == 0 {
            c.state = State::Terminated(term);
            self.next_init(ctx);
            return;
        }
        let restart = match policy.as_str() {
            // A killed sidecar restarts whatever the pod's policy.
            _ if killed.is_some() && init => true,
            "Never" => false,
            // A container killed by its kubelet restarts whatever its exit code.
            "OnFailure" if killed.is_some() => true,
            "OnFailure" => exit_code != 0,
            _ => true,
        };
        if !restart {
            c.state = State::Terminated(term);
            return;
        }
        let n = c.crashes;
        c.crashes += 1;
        c.last = Some(term.clone());
        // Upstream restarts the first time at once, then waits 10s, 20s, ... (the back-off
        // counts from the container's exit).
        if n == 0 {
            c.state = State::Terminated(term);
            c.step = Some((ctx.now, Step::Start));
            return;
        }
        let wait = backoff(n - 1);
        let name = c.spec.name.clone();
        c.state = State::Waiting {
            reason: "CrashLoopBackOff",
            message: Some(format!(
                "back-off {} restarting failed container={name} pod={pod_ref}",
                format_go(wait)
            )),
        };
        c.step = Some((ctx.now + ctx.cfg.backoff(wait), Step::Start));
        out.events.push(PodEvent {
            field_path: Some(c.field_path()),
            kind: EventType::Warning,
            reason: "BackOff".into(),
            message: format!("Back-off restarting failed container {name} in pod {pod_ref}"),
        });
    }

    /// A certificate generator's run ended with `code`: the container exits now, if that run
    /// is still the one running.
    pub fn tool_exited(
        &mut self,
        init: bool,
        i: usize,
        container_id: &str,
        code: i32,
        ctx: &mut Ctx<'_>,
    ) -> Outcome {
        let list = if init { &self.init } else { &self.containers };
        let current = list
            .get(i)
            .is_some_and(|c| c.is_running() && c.container_id.as_deref() == Some(container_id));
        if current {
            let c = self.ctr(init, i);
            c.planned_exit = code;
            c.step = Some((ctx.now, Step::Exit));
        }
        self.advance(ctx)
    }

    fn next_init(&mut self, ctx: &mut Ctx<'_>) {
        let delay = self.start_delay(ctx);
        let all_done = self.init.iter().all(Ctr::init_done);
        match self
            .init
            .iter_mut()
            .find(|c| !c.init_done() && c.step.is_none() && !c.is_running())
        {
            Some(next) => {
                next.step = Some((ctx.now + delay, Step::Start));
                next.pull_took = delay;
            }
            None if all_done => self.schedule_app_starts(ctx.now, delay),
            None => {}
        }
    }

    fn fail(&mut self, ctx: &mut Ctx<'_>, out: &mut Outcome) {
        self.fail_at = None;
        let Some(Chosen {
            fault:
                Fault::FailAfter {
                    reason,
                    message,
                    exit_code,
                    ..
                },
            ..
        }) = self.chosen.clone()
        else {
            return;
        };
        for c in self.containers.iter_mut().chain(self.init.iter_mut()) {
            c.halt();
            c.ready = false;
            c.started = false;
            if let State::Running { since } = &c.state {
                c.state = State::Terminated(Terminated {
                    exit_code,
                    reason: if exit_code == 0 { "Completed" } else { "Error" },
                    started: since.clone(),
                    finished: ctx.wall.clone(),
                    container_id: c.container_id.clone(),
                });
            }
        }
        self.phase = Phase::Failed;
        out.events.push(PodEvent {
            field_path: None,
            kind: EventType::Warning,
            reason: reason.clone().into(),
            message: message.clone(),
        });
        self.reason = Some(reason);
        self.message = Some(message);
    }

    /// The API set `deletionTimestamp`: kill the containers now (Killing events) and finish once
    /// the (scaled) grace period is over; a terminal pod finishes at once. A later, shorter grace
    /// period brings the end forward.
    pub fn observe_deletion(&mut self, grace: i64, ctx: &mut Ctx<'_>) -> Outcome {
        let mut out = Outcome::default();
        if self.finished {
            return out;
        }
        let deadline = if self.phase.is_terminal() {
            ctx.now
        } else {
            ctx.now + ctx.cfg.grace(grace)
        };
        match self.deleting {
            Some((t, g)) if g <= grace || t <= deadline => return out,
            Some(_) => {}
            None => {
                for c in self
                    .init
                    .iter()
                    .chain(&self.containers)
                    .filter(|c| c.is_running())
                {
                    out.events.push(PodEvent {
                        field_path: Some(c.field_path()),
                        kind: EventType::Normal,
                        reason: "Killing".into(),
                        message: format!("Stopping container {}", c.spec.name),
                    });
                }
            }
        }
        self.deleting = Some((deadline, grace));
        // No more starts, restarts or probes while terminating.
        for c in self.init.iter_mut().chain(self.containers.iter_mut()) {
            c.halt();
        }
        self.fail_at = None;
        let more = self.advance(ctx);
        out.events.extend(more.events);
        out.finish = more.finish;
        out.status_changed = more.status_changed;
        out
    }

    /// The pod's spec changed: containers whose image changed restart in place.
    pub fn observe_spec(&mut self, view: &PodView, ctx: &mut Ctx<'_>) -> Outcome {
        let mut out = Outcome::default();
        self.scheduled = view
            .scheduled
            .as_ref()
            .map(compact)
            .or(self.scheduled.take());
        if self.finished || self.deleting.is_some() || self.phase.is_terminal() {
            return out;
        }
        let changed: Vec<usize> = (0..self.containers.len())
            .filter(|&i| {
                view.containers.get(i).is_some_and(|s| {
                    s.name == self.containers[i].spec.name
                        && s.image != self.containers[i].spec.image
                })
            })
            .collect();
        if changed.is_empty() {
            return out;
        }
        let images: Vec<&str> = view
            .init
            .iter()
            .chain(&view.containers)
            .map(|c| c.image.as_str())
            .collect();
        let labels: std::collections::BTreeMap<String, String> = self
            .facts_labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let facts = PodFacts {
            namespace: &self.namespace,
            labels: Some(&labels),
            fault_annotation: self.fault_annotation.as_deref(),
            node: &self.node,
            images: &images,
        };
        self.chosen = ctx.profile.choose(&facts, &mut self.rng);
        let initialized = self.init.iter().all(Ctr::init_done);
        let delay = self.start_delay(ctx);
        for i in changed {
            let spec = view.containers[i].clone();
            let fault = self
                .chosen
                .as_ref()
                .filter(|ch| ch.fault.is_container_fault() && ch.affects(&spec.image))
                .map(|ch| ch.fault.clone());
            let wall = ctx.wall.clone();
            let c = &mut self.containers[i];
            if let State::Running { since } = &c.state {
                out.events.push(PodEvent {
                    field_path: Some(c.field_path()),
                    kind: EventType::Normal,
                    reason: "Killing".into(),
                    message: format!(
                        "Container {} definition changed, will be restarted",
                        c.spec.name
                    ),
                });
                c.last = Some(Terminated {
                    exit_code: 0,
                    reason: "Completed",
                    started: since.clone(),
                    finished: wall,
                    container_id: c.container_id.clone(),
                });
            }
            c.spec = spec;
            c.fault = fault;
            c.ready = false;
            c.started = false;
            c.halt();
            c.pull_failures = 0;
            c.crashes = 0;
            if initialized {
                c.state = State::Waiting {
                    reason: "ContainerCreating",
                    message: None,
                };
                c.step = Some((ctx.now + delay, Step::Start));
                c.pull_took = delay;
            }
        }
        let more = self.advance(ctx);
        out.events.extend(more.events);
        out.status_changed = true;
        out
    }

    fn stop_all(&mut self, wall: &str) {
        // A killed run-to-completion container did not finish its work: it ends as SIGKILL
        // (137, `Error`) and the pod `Failed`, which is what a Job counts. Long-running
        // (`Always`) containers are taken to exit cleanly on SIGTERM, as before.
        let (exit_code, reason) = if self.runs_to_completion() {
            (137, "Error")
        } else {
            (0, "Completed")
        };
        for c in self.init.iter_mut().chain(self.containers.iter_mut()) {
            c.halt();
            c.ready = false;
            c.started = false;
            if let State::Running { since } = &c.state {
                c.state = State::Terminated(Terminated {
                    exit_code,
                    reason,
                    started: since.clone(),
                    finished: wall.to_string(),
                    container_id: c.container_id.clone(),
                });
            }
        }
    }

    /// Recomputes phase and conditions from the containers, as upstream's `getPhase` and
    /// condition generators do.
    fn refresh(&mut self, wall: &str) {
        if !self.phase.is_terminal() {
            self.phase = self.compute_phase();
        }
        let set =
            |c: &mut Cond, status: bool, reason: Option<&'static str>, message: Option<String>| {
                if c.status != status {
                    c.since = wall.to_string();
                }
                c.status = status;
                c.reason = reason;
                c.message = message;
            };
        let pending_init: Vec<&str> = self
            .init
            .iter()
            .filter(|c| !c.init_done())
            .map(|c| c.spec.name.as_str())
            .collect();
        if pending_init.is_empty() || (self.phase.is_terminal() && !self.init_failed()) {
            set(&mut self.initialized, true, None, None);
        } else {
            let m = unready_message("containers with incomplete status:", &pending_init);
            set(
                &mut self.initialized,
                false,
                Some("ContainersNotInitialized"),
                Some(m),
            );
        }
        let unready: Vec<&str> = self
            .init
            .iter()
            .filter(|c| c.spec.sidecar)
            .chain(&self.containers)
            .filter(|c| !c.ready)
            .map(|c| c.spec.name.as_str())
            .collect();
        let (status, reason, message) = match self.phase {
            Phase::Succeeded => (false, Some("PodCompleted"), None),
            Phase::Failed => (false, Some("PodFailed"), None),
            _ if unready.is_empty() => (true, None, None),
            _ => (
                false,
                Some("ContainersNotReady"),
                Some(unready_message("containers with unready status:", &unready)),
            ),
        };
        set(&mut self.containers_ready, status, reason, message.clone());
        set(&mut self.ready, status, reason, message);
        if self.finished || self.phase.is_terminal() {
            set(&mut self.sandbox, false, None, None);
        }
    }

    /// Whether an init container (not a sidecar) exited with a failure.
    fn init_failed(&self) -> bool {
        self.init
            .iter()
            .any(|c| !c.spec.sidecar && c.exit_code().is_some_and(|e| e != 0))
    }

    fn compute_phase(&self) -> Phase {
        if self.finished {
            let failed = self
                .containers
                .iter()
                .any(|c| c.exit_code().is_some_and(|e| e != 0));
            return if failed {
                Phase::Failed
            } else {
                Phase::Succeeded
            };
        }
        if self.restart_policy == "Never" && self.init_failed() {
            // A failed init container is not restarted: the pod has failed (upstream's
            // getPhase).
            return Phase::Failed;
        }
        if !self.init.iter().all(Ctr::init_done) {
            return Phase::Pending;
        }
        let (mut running, mut waiting, mut stopped, mut succeeded, mut failed) = (0, 0, 0, 0, 0);
        for c in &self.containers {
            match &c.state {
                State::Running { .. } => running += 1,
                State::Terminated(t) => {
                    stopped += 1;
                    if t.exit_code == 0 {
                        succeeded += 1
                    } else {
                        failed += 1
                    }
                }
                State::Waiting { .. } if c.last.is_some() => stopped += 1,
                State::Waiting { .. } => waiting += 1,
            }
        }
        if waiting > 0 {
            Phase::Pending
        } else if running > 0 {
            Phase::Running
        } else if stopped > 0 {
            match self.restart_policy.as_str() {
                "Never" if failed > 0 => Phase::Failed,
                "Never" => Phase::Succeeded,
                "OnFailure" if succeeded == stopped => Phase::Succeeded,
                _ => Phase::Running,
            }
        } else {
            Phase::Pending
        }
    }

    /// The `status` the kubelet posts (a merge patch of everything it owns).
    pub fn status(&self, _wall: &str) -> Value {
        // `reason` and `message` are always written, null when there is none: the status is a
        // strategic merge patch, which merges a condition into the stored one of its type, so
        // an absent field would keep a stale reason (`ContainersNotReady` on a Ready pod).
        let cond = |kind: &str, c: &Cond| {
            json!({"type": kind, "status": if c.status { "True" } else { "False" },
                   "lastProbeTime": null, "lastTransitionTime": c.since,
                   "reason": c.reason, "message": c.message})
        };
        let mut conditions = vec![
            cond("PodReadyToStartContainers", &self.sandbox),
            cond("Initialized", &self.initialized),
            cond("Ready", &self.ready),
            cond("ContainersReady", &self.containers_ready),
        ];
        conditions.push(self.scheduled.as_deref().and_then(|s| serde_json::from_str(s).ok()).unwrap_or_else(|| {
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": self.start_time})
        }));
        let mut s = Map::new();
        s.insert("phase".into(), json!(self.phase.as_str()));
        s.insert("conditions".into(), Value::Array(conditions));
        s.insert("hostIP".into(), json!(self.host_ip.to_string()));
        s.insert("hostIPs".into(), json!([{"ip": self.host_ip.to_string()}]));
        if let Some(ip) = self.ip.filter(|_| self.mounting.is_none()) {
            s.insert("podIP".into(), json!(ip.to_string()));
            s.insert("podIPs".into(), json!([{"ip": ip.to_string()}]));
        }
        s.insert("startTime".into(), json!(self.start_time));
        if let Some(r) = &self.reason {
            s.insert("reason".into(), json!(r));
        }
        if let Some(m) = &self.message {
            s.insert("message".into(), json!(m));
        }
        if !self.init.is_empty() {
            s.insert(
                "initContainerStatuses".into(),
                self.init.iter().map(container_status).collect(),
            );
        }
        s.insert(
            "containerStatuses".into(),
            self.containers.iter().map(container_status).collect(),
        );
        Value::Object(s)
    }
}

#[derive(Clone, Copy, Debug)]
enum Due {
    Step(Step),
    Ready,
    Probe(ProbeKind),
}

fn pull_error(c: &Ctr) -> String {
    if let Some(Fault::ImagePullFailure { message: Some(m) }) = &c.fault {
        return m.clone();
    }
    let full = image::normalize(&c.spec.image);
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
    )
}

fn terminated_json(t: &Terminated) -> Value {
    let mut v = json!({"exitCode": t.exit_code, "reason": t.reason, "startedAt": t.started, "finishedAt": t.finished});
    if let Some(id) = &t.container_id {
        v["containerID"] = json!(id);
    }
    v
}

fn container_status(c: &Ctr) -> Value {
    let state = match &c.state {
        State::Waiting { reason, message } => {
            let mut w = json!({"reason": reason});
            if let Some(m) = message {
                w["message"] = json!(m);
            }
            json!({"waiting": w})
        }
        State::Running { since } => json!({"running": {"startedAt": since}}),
        State::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    let last = c
        .last
        .as_ref()
        .map_or_else(|| json!({}), |t| json!({"terminated": terminated_json(t)}));
    let pulled = !c.image_id.is_empty();
    let mut v = json!({
        "name": c.spec.name,
        "state": state,
        "lastState": last,
        "ready": c.ready,
        "restartCount": c.restarts,
        "image": if pulled { image::normalize(&c.spec.image) } else { c.spec.image.clone() },
        "imageID": c.image_id,
        "started": c.started,
    });
    if let Some(id) = &c.container_id {
        v["containerID"] = json!(id);
    }
    v
}

/// The wall-clock time for status fields.
pub fn wall_now() -> String {
    time(clock::now())
}

#[cfg(test)]
mod tests;
