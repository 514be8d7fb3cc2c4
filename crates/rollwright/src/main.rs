//! `rollwright`: the embedded Kubernetes-compatible control plane and its tools.

mod cli;

use anyhow::Context;
use clap::{Parser, Subcommand};
use embedded::agent::Component;
use rollwright::{
    components::{self, Components},
    control_plane::{ControlPlane, Options, StoreKind},
};
use std::{net::IpAddr, path::PathBuf};

#[derive(Parser)]
#[command(
    name = "rollwright",
    version,
    about = "A Kubernetes workload-rollout system with an embedded control plane"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct ServeArgs {
    /// Directory for the store, certificates and kubeconfig.
    #[arg(long, default_value = ".rollwright", env = "ROLLWRIGHT_DATA_DIR")]
    data_dir: PathBuf,
    /// Port to listen on; 0 picks a free one (the kubeconfig names it).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Address to bind. Loopback by default; anything else exposes the API beyond this machine.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Store backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// With `--store etcd`: the etcd members' client URLs, comma-separated. API servers on the same
    /// etcd serve one cluster.
    #[arg(long, value_delimiter = ',', required_if_eq("store", "etcd"))]
    etcd_servers: Vec<String>,
    /// How long an Event is kept after its last write (e.g. 1h, 30m, 90s), as upstream's
    /// --event-ttl.
    #[arg(long, default_value = "1h", value_parser = rollwright::duration::parse)]
    event_ttl: std::time::Duration,
    /// The most Events kept at once: beyond it the least recently written are deleted before
    /// their TTL (a flood of Events otherwise holds more memory than the pods it is about); 0
    /// keeps every Event for its TTL, as upstream.
    #[arg(long, default_value_t = apiserver::DEFAULT_EVENT_BUDGET)]
    event_budget: usize,
    /// With `--store etcd`: how often etcd's history is compacted (e.g. 5m; 0 leaves it to etcd's
    /// own --auto-compaction or an operator), as upstream's --etcd-compaction-interval. API
    /// servers sharing one etcd take turns.
    #[arg(long, default_value = "5m", value_parser = rollwright::duration::parse)]
    etcd_compaction_interval: std::time::Duration,
    /// An audit.k8s.io/v1 Policy (YAML or JSON) saying which requests are audited and how
    /// much of each, as upstream's --audit-policy-file; auditing needs --audit-log-path too.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events are appended as JSON lines (`-` for standard output), as upstream's
    /// --audit-log-path.
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log may reach before it is rotated (upstream's --audit-log-maxsize;
    /// 0: 100, lumberjack's default).
    #[arg(long = "audit-log-maxsize", default_value_t = 0)]
    audit_log_maxsize: u64,
    /// Rotated audit logs kept (upstream's --audit-log-maxbackup; 0: all).
    #[arg(long = "audit-log-maxbackup", default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// Days a rotated audit log is kept (upstream's --audit-log-maxage; 0: no limit).
    #[arg(long = "audit-log-maxage", default_value_t = 0)]
    audit_log_maxage: u64,
}

#[derive(clap::Args, Clone)]
struct ClusterArgs {
    /// Kubeconfig of the cluster to work on (default: $KUBECONFIG, then in a pod its
    /// ServiceAccount and KUBERNETES_SERVICE_HOST/PORT, then ./.rollwright/kubeconfig).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
}

/// The client-side rate limit of a component's clients, with upstream's flags. Each client (each
/// controller's, the shared caches', the leader election's, each simulated kubelet's) has a token
/// bucket of its own, as each clientset upstream has.
#[derive(clap::Args, Clone)]
struct ApiLimitArgs {
    /// Requests a second each client sends at most on average, as upstream's --kube-api-qps
    /// (default: kube-controller-manager's 20 for `controllers`, kube-scheduler's and the
    /// kubelet's 50 for `scheduler` and `nodes`); a negative value turns the limit off.
    #[arg(long, allow_negative_numbers = true)]
    kube_api_qps: Option<f32>,
    /// Requests each client may send at once after a quiet spell, as --kube-api-burst (default:
    /// 30 for `controllers`, 100 for `scheduler` and `nodes`).
    #[arg(long)]
    kube_api_burst: Option<u32>,
}

impl ApiLimitArgs {
    /// The limit, the component's upstream default where a flag is not given.
    fn limit(&self, default: restclient::Limit) -> anyhow::Result<Option<restclient::Limit>> {
        let limit = restclient::Limit::new(
            self.kube_api_qps.unwrap_or(default.qps),
            self.kube_api_burst.unwrap_or(default.burst),
        )
        .context("--kube-api-qps/--kube-api-burst")?;
        match limit {
            Some(limit) => tracing::info!(%limit, "client rate limit"),
            None => tracing::info!("no client rate limit (--kube-api-qps is negative)"),
        }
        Ok(limit)
    }
}

/// Where `controllers` and `scheduler` serve /healthz, /readyz and /metrics (HTTPS, a
/// self-signed certificate), with kube-controller-manager's flags.
#[derive(clap::Args, Clone)]
struct StatusArgs {
    /// Address to serve on. Loopback by default (upstream's is every interface): /metrics is
    /// served to anyone who can connect; in a pod, 0.0.0.0 for the kubelet's probes.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// Port to serve on; 0 serves nothing (default: kube-controller-manager's 10257 for
    /// `controllers`, kube-scheduler's 10259 for `scheduler`).
    #[arg(long)]
    secure_port: Option<u16>,
}

impl StatusArgs {
    async fn serve(
        &self,
        default_port: u16,
    ) -> anyhow::Result<Option<rollwright::status_server::StatusServer>> {
        let port = self.secure_port.unwrap_or(default_port);
        if port == 0 {
            return Ok(None);
        }
        let addr = std::net::SocketAddr::new(self.bind_address, port);
        Ok(Some(rollwright::status_server::serve(addr).await?))
    }
}

#[derive(clap::Args, Clone)]
struct ControllersArgs {
    /// Controllers to run, as kube-controller-manager's: `*` for all, `name` to add one, `-name`
    /// to leave one out (e.g. `*,-garbagecollector`), an empty list for none. Names: replicaset,
    /// replicationcontroller, deployment, daemonset, statefulset, persistentvolume-binder,
    /// garbagecollector, podgc, resourcequota,
    /// nodelifecycle, namespace, serviceaccount, root-ca-cert-publisher, endpoint, endpointslice,
    /// disruption, job, cronjob, ttl-after-finished, clusterrole-aggregation.
    #[arg(long, default_value = "*")]
    controllers: controllers::Selection,
    /// PEM bundle of the cluster's root CA, which the root-ca-cert-publisher puts in every
    /// namespace as the ConfigMap kube-root-ca.crt (kube-controller-manager's --root-ca-file).
    /// Default: `up` publishes the CA it generated, `controllers` its kubeconfig's CA.
    #[arg(long)]
    root_ca_file: Option<PathBuf>,
    /// Ask the PodDisruptionBudgets before every Deployment, DaemonSet and StatefulSet update
    /// takes a pod down, as an eviction would, not only for workloads annotated
    /// `rollwright.io/honor-disruption-budgets: "true"` (`"false"` still opts one out).
    #[arg(long)]
    honor_disruption_budgets: bool,
}

impl ControllersArgs {
    /// The settings; a `--root-ca-file` that cannot be read or holds no certificate is an error
    /// before anything starts, as it is for kube-controller-manager.
    fn settings(&self) -> anyhow::Result<controllers::Settings> {
        let bundle = self
            .root_ca_file
            .as_deref()
            .map(controllers::root_ca::RootCa::read)
            .transpose()?;
        Ok(controllers::Settings {
            enabled: self.controllers.clone(),
            root_ca: controllers::root_ca::Config {
                bundle,
                ..Default::default()
            },
            honor_disruption_budgets: self.honor_disruption_budgets,
            ..Default::default()
        })
    }
}

/// A part of which several processes may run, one acting at a time.
#[derive(clap::Args, Clone)]
struct ElectedArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Act only while holding a Lease (leaseDurationSeconds 15, renew deadline 10s, retry 2s),
    /// so that several processes can run for availability.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The namespace of the Lease, as upstream's --leader-elect-resource-namespace (`rollwright
    /// install` uses its own namespace, where its Role grants the Lease).
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    #[command(flatten)]
    limits: ApiLimitArgs,
    #[command(flatten)]
    status: StatusArgs,
}

impl ElectedArgs {
    /// The election, if any, renewing through `client` (a client of its own, as upstream's
    /// leader election has).
    fn election(&self, client: kube::Client) -> Option<components::Election> {
        self.leader_elect.then(|| components::Election {
            namespace: self.leader_elect_resource_namespace.clone(),
            client: Some(client),
            ..Default::default()
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Start the whole control plane (API server, scheduler, controllers, simulated nodes) and run
    /// until Ctrl-C or SIGTERM.
    Up {
        #[command(flatten)]
        serve: ServeArgs,
        /// Simulated nodes to run.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Fault profile for simulated pods (YAML; see crates/nodesim/PROFILE.md).
        #[arg(long)]
        profile: Option<PathBuf>,
        #[command(flatten)]
        controllers: ControllersArgs,
    },
    /// Run the API server alone.
    Apiserver(ServeArgs),
    /// Run the controllers (garbage collector, node lifecycle, workloads) against a cluster.
    Controllers {
        #[command(flatten)]
        elected: ElectedArgs,
        #[command(flatten)]
        controllers: ControllersArgs,
    },
    /// Run the scheduler against a cluster.
    Scheduler(ElectedArgs),
    /// Print the manifests that run rollwright's workload controllers on a real cluster (a
    /// namespace, a ServiceAccount bound to upstream's roles for those controllers, a Role on its
    /// Lease, a Deployment of two replicas and a PodDisruptionBudget), or apply them.
    Install(InstallArgs),
    /// Simulate nodes against a cluster, or change simulated nodes at run time.
    Nodes {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Nodes to register when simulating.
        #[arg(long, default_value_t = 3)]
        count: usize,
        /// Simulate only this shard's nodes (`INDEX/COUNT`), so that several processes simulate
        /// one cluster: `node-0` ... `node-{count-1}` are split between them by name.
        #[arg(long, default_value = "0/1")]
        shard: nodesim::Shard,
        /// Fault profile for simulated pods.
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Milliseconds from a pod's binding to its containers running (default: uniform over
        /// 500 to 1500; a profile's `startDelay` wins).
        #[arg(long)]
        start_delay_ms: Option<u64>,
        /// Milliseconds from a container running to Ready (default: uniform over 500 to 1500; a
        /// profile's `readinessDelay` wins).
        #[arg(long)]
        readiness_delay_ms: Option<u64>,
        /// Do not record Events.
        #[arg(long)]
        no_events: bool,
        #[command(flatten)]
        limits: ApiLimitArgs,
        /// On shutdown, print the lease renewals' latency as one JSON line on standard output
        /// (`{"lease_latency": ...}`): how `bench nodes --shards` collects it from its shards.
        #[arg(long)]
        report_leases: bool,
        #[command(subcommand)]
        op: Option<NodeOp>,
    },
    /// Print a kubeconfig for a user of a control plane started with `up` or `apiserver`: a
    /// client certificate signed by its CA (CN the user, O each group), so that the user holds
    /// only what RBAC grants them.
    Kubeconfig {
        /// The control plane's data directory.
        #[arg(long, default_value = ".rollwright", env = "ROLLWRIGHT_DATA_DIR")]
        data_dir: PathBuf,
        /// The user's name.
        #[arg(long)]
        user: String,
        /// A group of the user (repeat for several).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Write it to this file (readable by its owner only) instead of standard output.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Run a benchmark and print its figures.
    Bench {
        #[command(subcommand)]
        scenario: BenchScenario,
    },
    /// The CLI: rollout, get, apply, delete, set, scale.
    #[command(flatten)]
    Cli(cli::Command),
    /// Roll Deployments and DaemonSets while SIGKILLing the control plane or the controllers at
    /// random moments; print rollouts completed, restarts, acknowledged writes lost, invariant
    /// violations, duplicate daemon pods and time to recover (see RELIABILITY.md).
    Chaos(rollwright::chaos::Args),
}

#[derive(clap::Args)]
struct InstallArgs {
    /// The controllers to run (turned off in the cluster's own controller manager).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "deployment,replicaset,daemonset,statefulset"
    )]
    controllers: Vec<String>,
    /// The namespace to install into.
    #[arg(long, default_value = "rollwright-system")]
    namespace: String,
    /// The image holding the rollwright binary (`tools/image` builds this one).
    #[arg(long, default_value = concat!("localhost/rollwright:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// Apply the manifests (server-side apply) instead of printing them.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// The benchmarks: the library's, and the rehearsal's, which drives the CLI.
#[derive(Subcommand)]
enum BenchScenario {
    #[command(flatten)]
    Lib(rollwright::bench::Scenario),
    /// Rehearse changes of a source cluster (a Deployment with a PDB, a DaemonSet, a
    /// StatefulSet) with `whatif`, then make them on it; predicted beside real durations.
    Whatif(cli::whatif::bench::WhatifBench),
}

#[derive(Subcommand)]
enum NodeOp {
    /// Register more simulated nodes (the running simulator picks them up).
    Add {
        /// How many.
        #[arg(default_value_t = 1)]
        count: usize,
        /// CPU capacity of each (a quantity).
        #[arg(long, default_value = "8")]
        cpu: String,
        /// Memory capacity of each (a quantity).
        #[arg(long, default_value = "32Gi")]
        memory: String,
        /// Pod capacity of each.
        #[arg(long, default_value_t = 110)]
        pods: u32,
    },
    /// Delete a node.
    Remove { name: String },
    /// Stop a node's heartbeats, as if its kubelet died.
    Stop { name: String },
    /// Resume a stopped node's heartbeats.
    Start { name: String },
    /// Put a node under pressure (or relieve it with none of the flags).
    Pressure {
        name: String,
        #[arg(long)]
        memory: bool,
        #[arg(long)]
        disk: bool,
        #[arg(long)]
        pid: bool,
    },
}

/// mimalloc instead of glibc's malloc: a profile of `bench phases` spent 45% of the process's CPU
/// in glibc's malloc and free (`_int_malloc`, `malloc_consolidate`, `unlink_chunk`: every watch
/// event, request and decoded object allocates); see BENCHMARKS.md, issue 15. The `system-alloc`
/// feature keeps glibc's malloc, for heap profilers that intercept it (`valgrind --tool=massif`).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Before the runtime's threads exist: mimalloc's options are read unsynchronised.
    #[cfg(not(feature = "system-alloc"))]
    allocator::configure();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // One line with the cause chain, never a backtrace: the message says what to do.
    match runtime.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and those of its causes that add something (client errors repeat their cause in
/// their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        // A refusal's Status is already in the message of whatever wrapped it, and so are the
        // causes below it.
        if matches!(
            cause.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(_))
        ) {
            break;
        }
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The CLI's output is its own (its errors are one line each); the servers log what they do.
    let level = if matches!(cli.command, Command::Cli(_)) {
        "off"
    } else {
        "info"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Up {
            serve: args,
            nodes,
            profile,
            controllers,
        } => {
            let components = Components {
                controllers: Some(controllers.settings()?),
                ..Components::all(nodes, profile)
            };
            serve(args, components).await
        }
        Command::Apiserver(args) => serve(args, Components::default()).await,
        Command::Kubeconfig {
            data_dir,
            user,
            groups,
            output,
        } => rollwright::user_kubeconfig::write(&data_dir, &user, &groups, output.as_deref()),
        Command::Controllers {
            elected,
            controllers,
        } => {
            let mut settings = controllers.settings()?;
            let mut config = kube_config(&elected.cluster).await?;
            introduce(&mut config, Component::ControllerManager);
            if settings.root_ca.bundle.is_none() {
                settings.root_ca.bundle = kubeconfig_ca(&config);
            }
            let limit = elected
                .limits
                .limit(restclient::Limit::CONTROLLER_MANAGER)?;
            let clients = Clients::new(config, limit)?;
            let _status = elected.status.serve(10257).await?;
            let running = components::start_with_controller_clients(
                clients.own(),
                &Components {
                    controllers: Some(settings),
                    ..Default::default()
                },
                elected.election(clients.own()).as_ref(),
                clients.per_controller(),
            )?;
            until_shutdown(running).await
        }
        Command::Scheduler(c) => {
            let mut config = kube_config(&c.cluster).await?;
            introduce(&mut config, Component::Scheduler);
            let clients = Clients::new(config, c.limits.limit(restclient::Limit::SCHEDULER)?)?;
            let _status = c.status.serve(10259).await?;
            let running = components::start_elected(
                clients.own(),
                &Components {
                    scheduler: Some(Default::default()),
                    ..Default::default()
                },
                c.election(clients.own()).as_ref(),
            )?;
            until_shutdown(running).await
        }
        Command::Install(args) => install(args).await,
        Command::Nodes {
            cluster,
            count,
            shard,
            profile,
            start_delay_ms,
            readiness_delay_ms,
            no_events,
            report_leases,
            limits,
            op: None,
        } => {
            let fixed = |ms: u64| {
                nodesim::distribution::Distribution::Fixed(std::time::Duration::from_millis(ms))
            };
            let defaults = nodesim::NodeSim::default();
            let nodes = nodesim::NodeSim {
                nodes: count,
                shard,
                start_delay: start_delay_ms.map_or(defaults.start_delay.clone(), fixed),
                readiness_delay: readiness_delay_ms.map_or(defaults.readiness_delay.clone(), fixed),
                events: !no_events,
                ..defaults
            };
            let profile = match &profile {
                Some(path) => nodesim::load_profile(path)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                None => nodesim::Profile::default(),
            };
            // As `components::start` runs it (one client, no election), keeping the counters
            // for `--report-leases`.
            let stats = std::sync::Arc::new(nodesim::Stats::default());
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            // Each simulated kubelet with a client (and so a rate limit) of its own, as each
            // real one has; the shared watches with one more.
            let mut config = kube_config(&cluster).await?;
            introduce(&mut config, Component::Kubelet);
            let clients = Clients::new(config, limits.limit(restclient::Limit::KUBELET)?)?;
            let per_node = clients.clone();
            let identities = nodesim::Identities::new(
                clients.own(),
                std::sync::Arc::new(move |_node: &str| per_node.own()),
            );
            let sim = tokio::spawn(nodesim::run_as_with_stats(
                identities,
                nodes,
                profile,
                async move {
                    let _ = stopped.await;
                },
                stats.clone(),
            ));
            shutdown_signal()
                .await
                .context("waiting for a shutdown signal")?;
            let _ = stop.send(());
            match sim.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "node simulator stopped"),
                Err(e) => tracing::error!(error = %e, "node simulator panicked"),
            }
            if report_leases {
                println!(
                    "{}",
                    rollwright::bench::lease_report_line(&stats, shard.to_string())
                );
            }
            Ok(())
        }
        Command::Nodes {
            cluster,
            op: Some(op),
            ..
        } => node_op(&cluster, op).await,
        Command::Bench {
            scenario: BenchScenario::Lib(scenario),
        } => rollwright::bench::run(scenario).await,
        Command::Bench {
            scenario: BenchScenario::Whatif(b),
        } => cli::whatif::bench::run(b).await,
        Command::Cli(command) => cli::run(command).await,
        Command::Chaos(args) => rollwright::chaos::run(args).await,
    }
}

async fn serve(args: ServeArgs, components: Components) -> anyhow::Result<()> {
    let cp = ControlPlane::start(Options {
        data_dir: args.data_dir.clone(),
        bind: args.bind,
        port: args.port,
        store: args.store,
        etcd_servers: args.etcd_servers,
        event_ttl: args.event_ttl,
        event_budget: (args.event_budget > 0).then_some(args.event_budget),
        etcd_compaction_interval: args.etcd_compaction_interval,
        audit_policy_file: args.audit_policy_file,
        audit_log_path: args.audit_log_path,
        audit_log_rotation: apiserver::audit::Rotation {
            max_size_mb: args.audit_log_maxsize,
            max_backups: args.audit_log_maxbackup,
            max_age_days: args.audit_log_maxage,
        },
        components,
        defer_components: false,
    })
    .await?;
    let kubeconfig = std::fs::canonicalize(&cp.kubeconfig).unwrap_or(cp.kubeconfig.clone());
    println!("rollwright API server listening on https://{}", cp.addr);
    println!("kubeconfig: {}", kubeconfig.display());
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get nodes");
    shutdown_signal()
        .await
        .context("waiting for a shutdown signal")?;
    tracing::info!("shutting down");
    cp.stop().await;
    Ok(())
}

/// A client of the cluster `args` name for `component`, which introduces itself as upstream's.
async fn client(args: &ClusterArgs, component: Component) -> anyhow::Result<kube::Client> {
    let mut config = kube_config(args).await?;
    introduce(&mut config, component);
    Ok(kube::Client::try_from(config)?)
}

/// One connection pool to the cluster, and clients on it each with a rate limiter of its own, as
/// kube-controller-manager builds a clientset per controller (and for the shared informers and
/// the leader election) from one configuration.
#[derive(Clone)]
struct Clients {
    base: kube::Client,
    limit: Option<restclient::Limit>,
    host: String,
}

impl Clients {
    fn new(config: kube::Config, limit: Option<restclient::Limit>) -> anyhow::Result<Self> {
        let host = restclient::metrics::host(&config.cluster_url);
        Ok(Self {
            base: kube::Client::try_from(config)?,
            limit,
            host,
        })
    }

    /// A client with a limiter of its own.
    fn own(&self) -> kube::Client {
        restclient::limited(&self.base, self.limit, &self.host)
    }

    /// A client of its own for each controller, made once (by the controller's account name).
    fn per_controller(&self) -> controllers::accounts::ClientFor {
        let made =
            std::sync::Mutex::new(std::collections::HashMap::<Option<String>, kube::Client>::new());
        let clients = self.clone();
        std::sync::Arc::new(move |account: Option<&str>| {
            let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
            made.entry(account.map(str::to_owned))
                .or_insert_with(|| clients.own())
                .clone()
        })
    }
}

/// Sends `component`'s `User-Agent`, which names its writes' field manager.
fn introduce(config: &mut kube::Config, component: Component) {
    config
        .headers
        .push((http::header::USER_AGENT, component.user_agent()));
}

/// The cluster's configuration: `--kubeconfig`, `$KUBECONFIG`, in a pod its ServiceAccount, or
/// `rollwright up`'s kubeconfig ([`restclient::config`]).
async fn kube_config(args: &ClusterArgs) -> anyhow::Result<kube::Config> {
    let (config, source) = restclient::config::Inference::from_env(args.kubeconfig.clone())
        .load()
        .await?;
    tracing::info!(%source, server = %config.cluster_url, "cluster configuration");
    Ok(config)
}

/// `rollwright install`: prints the manifests (with the flag for the cluster's own controller
/// manager as a comment, so that the output pipes into `kubectl apply -f -`), or applies them and
/// warns when the cluster's controller manager still runs.
async fn install(args: InstallArgs) -> anyhow::Result<()> {
    use rollwright::install;
    let plan = install::Install::new(&args.controllers, &args.namespace, &args.image)?;
    let manifests = plan.manifests();
    let flag = plan.kube_controller_manager_flag();
    if !args.apply {
        println!("# Turn the same controllers off in the cluster's own controller manager:");
        println!("#   kube-controller-manager {flag} ...");
        print!("{}", install::yaml(&manifests)?);
        return Ok(());
    }
    let client = kube::Client::try_from(kube_config(&args.cluster).await?)?;
    for applied in install::apply(&client, &manifests).await? {
        println!("{applied} applied");
    }
    if let Some(ago) = install::controller_manager_renewed(&client).await
        && install::held_recently(Some(ago))
    {
        eprintln!(
            "warning: the cluster's kube-controller-manager is running (Lease kube-system/kube-controller-manager renewed {}s ago); \
             unless it runs with {flag}, it and rollwright act on the same objects",
            ago.as_secs()
        );
    }
    println!("Turn the same controllers off in the cluster's own controller manager:");
    println!("  kube-controller-manager {flag} ...");
    Ok(())
}

/// The CA the kubeconfig trusts the cluster with, as the bundle to publish when no
/// `--root-ca-file` is given: kube-controller-manager falls back to its client's CA data the
/// same way. None (the publisher then says why it does not run) for a kubeconfig without one.
fn kubeconfig_ca(config: &kube::Config) -> Option<controllers::root_ca::RootCa> {
    let certs = config.root_cert.as_deref().filter(|c| !c.is_empty())?;
    match controllers::root_ca::RootCa::from_der(certs) {
        Ok(bundle) => Some(bundle),
        Err(e) => {
            tracing::warn!(error = %e, "the kubeconfig's CA cannot be published");
            None
        }
    }
}

async fn until_shutdown(running: components::Running) -> anyhow::Result<()> {
    shutdown_signal()
        .await
        .context("waiting for a shutdown signal")?;
    running.stop().await;
    Ok(())
}

async fn node_op(args: &ClusterArgs, op: NodeOp) -> anyhow::Result<()> {
    let client = client(args, Component::Kubelet).await?;
    match op {
        NodeOp::Add {
            count,
            cpu,
            memory,
            pods,
        } => {
            for (what, q) in [("--cpu", &cpu), ("--memory", &memory)] {
                api::quantity::Quantity::parse(q).map_err(|e| {
                    anyhow::anyhow!("{what} {q}: {e} (e.g. --cpu 16 --memory 64Gi)")
                })?;
            }
            let cfg = nodesim::NodeSim {
                cpu,
                memory,
                max_pods: pods,
                ..Default::default()
            };
            let names = nodesim::ops::add(&client, &cfg, count).await?;
            println!("added {}", names.join(", "));
        }
        NodeOp::Remove { name } => {
            nodesim::ops::remove(&client, &name).await?;
            println!("removed {name}");
        }
        NodeOp::Stop { name } => {
            nodesim::ops::stop(&client, &name).await?;
            println!("{name}: heartbeats stopped");
        }
        NodeOp::Start { name } => {
            nodesim::ops::start(&client, &name).await?;
            println!("{name}: heartbeats resumed");
        }
        NodeOp::Pressure {
            name,
            memory,
            disk,
            pid,
        } => {
            nodesim::ops::set_pressure(
                &client,
                &name,
                nodesim::node::Pressure { memory, disk, pid },
            )
            .await?;
            println!("{name}: pressure memory={memory} disk={disk} pid={pid}");
        }
    }
    Ok(())
}

async fn shutdown_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
