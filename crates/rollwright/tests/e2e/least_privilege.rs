//! Every part of the cluster acts within its upstream role: with each controller as its own
//! ServiceAccount (`system:controller:*`), the scheduler as `system:kube-scheduler` and each node
//! as `system:node:NAME`, a run through the workloads `rollwright up` serves — a Deployment
//! rollout, a StatefulSet with a volumeClaimTemplate, a DaemonSet, a Job, a CronJob, a
//! PodDisruptionBudget, a ResourceQuota, a ServiceAccount with a legacy token Secret and the
//! deletion of their namespace — has the API server refuse nothing.
//!
//! Refusals are counted by the server's `authorization_attempts_total` (upstream's metric, by
//! `result`); the authorization layer's debug log says which requests they were when there are
//! any (the in-process parts' requests are not audited).

use crate::common;

use common::Cluster;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::{Api, ResourceExt, runtime::watcher};
use rollwright::components::{Components, ControllerSettings};
use std::{collections::BTreeSet, time::Duration};

/// Pods of Jobs run for a second; the others run until deleted.
const PROFILE: &str = "startDelay: 100ms\nreadinessDelay: 100ms\nrunFor: 1s\n";

const NAMESPACE: &str = "least";

const WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: least}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.25"}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: least}
spec:
  replicas: 2
  serviceName: db
  # Scaled down, the controller makes the condemned pod its claim's owner (an update of the
  # claim), and the garbage collector deletes the claim after the pod.
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Delete}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "postgres:16", volumeMounts: [{name: data, mountPath: /data}]}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: least}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "fluentd:1"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: least}
spec:
  completions: 2
  parallelism: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: "busybox:1.36"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick, namespace: least}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: work, image: "busybox:1.36"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: least}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota, namespace: least}
spec:
  hard: {pods: "50", persistentvolumeclaims: "10"}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder, namespace: least}
---
apiVersion: v1
kind: Secret
metadata:
  name: builder-token
  namespace: least
  annotations: {kubernetes.io/service-account.name: builder}
type: kubernetes.io/service-account-token
"#;

// On one thread, so that the log subscriber set for this test sees the cluster's tasks.
#[tokio::test(flavor = "current_thread")]
async fn the_clusters_own_parts_are_refused_nothing() {
    let refusal_log = Log::default();
    let _log = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter("apiserver::filters::authorization=debug")
            .with_ansi(false)
            .with_writer(refusal_log.clone())
            .finish(),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = dir.path().join("profile.yaml");
    std::fs::write(&profile, PROFILE).expect("profile written");
    let mut settings = ControllerSettings::default();
    // A minute passes in a second, so the CronJob fires without the test waiting for one.
    settings.cronjob.clock = controllers::cronjob::Clock::scaled(60.0);
    let c = Cluster::start_with(Components {
        nodes: Some(nodesim::NodeSim {
            nodes: 2,
            ..Default::default()
        }),
        profile: Some(profile),
        scheduler: Some(Default::default()),
        controllers: Some(settings),
    })
    .await;

    let outcome = run(&c).await;
    let client = c.client().await;
    let metrics = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("a request"),
        )
        .await
        .expect("the metrics");
    let refused = refusals(&metrics);
    c.stop().await;
    if refused > 0 {
        let mut lines: Vec<String> = refusal_log
            .text()
            .lines()
            .filter(|l| l.contains("forbidden"))
            .map(|l| {
                l.split_once("forbidden")
                    .map_or(l, |(_, rest)| rest)
                    .trim()
                    .to_string()
            })
            .collect();
        lines.sort();
        lines.dedup();
        panic!(
            "the API server refused {refused} requests ({}):\n{}",
            match &outcome {
                Ok(()) => "the workloads still got where they were going".to_string(),
                Err(e) => format!("and {e}"),
            },
            lines.join("\n")
        );
    }
    if let Err(e) = outcome {
        panic!("{e}");
    }
    assert!(
        metrics.contains("authorization_attempts_total{result=\"allowed\"}"),
        "the metric counts allowed requests too:\n{metrics}"
    );
}

/// Runs the workloads to where they settle, then deletes their namespace; says which step did
/// not get there.
async fn run(c: &Cluster) -> Result<(), String> {
    kubectl(c, &["create", "namespace", NAMESPACE], None).await?;
    kubectl(c, &["apply", "-f", "-"], Some(WORKLOADS)).await?;
    let ns = |args: &[&str]| -> Vec<String> {
        ["-n", NAMESPACE]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect()
    };
    let steps: Vec<Vec<String>> = vec![
        ns(&["rollout", "status", "deployment/web", "--timeout=60s"]),
        ns(&["rollout", "status", "statefulset/db", "--timeout=60s"]),
        ns(&["rollout", "status", "daemonset/agent", "--timeout=60s"]),
        // A rollout to a new template: a second ReplicaSet scaled up as the first scales down.
        ns(&["set", "image", "deployment/web", "web=nginx:1.26"]),
        ns(&["rollout", "status", "deployment/web", "--timeout=60s"]),
        ns(&[
            "wait",
            "--for=condition=complete",
            "job/once",
            "--timeout=60s",
        ]),
        ns(&[
            "wait",
            "--for=jsonpath={.status.lastSuccessfulTime}",
            "cronjob/tick",
            "--timeout=60s",
        ]),
        ns(&[
            "wait",
            "--for=jsonpath={.status.currentHealthy}=2",
            "pdb/web",
            "--timeout=60s",
        ]),
        ns(&[
            "wait",
            "--for=jsonpath={.status.used.persistentvolumeclaims}=2",
            "resourcequota/quota",
            "--timeout=60s",
        ]),
        ns(&[
            "wait",
            "--for=jsonpath={.data.token}",
            "secret/builder-token",
            "--timeout=60s",
        ]),
        ns(&["scale", "statefulset/db", "--replicas=1"]),
        ns(&["rollout", "status", "statefulset/db", "--timeout=60s"]),
        ns(&[
            "wait",
            "--for=delete",
            "persistentvolumeclaim/data-db-1",
            "--timeout=60s",
        ]),
        // The namespace controller empties the namespace and finalizes it.
        vec![
            "delete".into(),
            "namespace".into(),
            NAMESPACE.into(),
            "--timeout=90s".into(),
        ],
    ];
    for step in steps {
        let args: Vec<&str> = step.iter().map(String::as_str).collect();
        kubectl(c, &args, None).await?;
    }
    // The volume controller deletes the released volumes of the claims deleted with it.
    no_volumes_left(&c.client().await).await
}

/// Runs kubectl; its failure is the step's.
async fn kubectl(c: &Cluster, args: &[&str], stdin: Option<&str>) -> Result<(), String> {
    let out = c.kubectl_raw(args, stdin).await;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Waits on a watch of PersistentVolumes until none is left.
async fn no_volumes_left(client: &kube::Client) -> Result<(), String> {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let mut names = BTreeSet::new();
    let mut listed = false;
    let events = watcher(api, watcher::Config::default());
    let gone = tokio::time::timeout(Duration::from_secs(60), async {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.try_next().await.expect("the watch") {
            match event {
                watcher::Event::Init => names.clear(),
                watcher::Event::InitApply(pv) | watcher::Event::Apply(pv) => {
                    names.insert(pv.name_any());
                }
                watcher::Event::Delete(pv) => {
                    names.remove(&pv.name_any());
                }
                watcher::Event::InitDone => listed = true,
            }
            if listed && names.is_empty() {
                return;
            }
        }
    })
    .await;
    gone.map_err(|_| format!("volumes left behind: {names:?}"))
}

/// The requests `authorization_attempts_total` counts as not allowed.
fn refusals(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("authorization_attempts_total{"))
        .filter(|l| !l.contains("result=\"allowed\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Log lines written by the test's subscriber.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Log;

    fn make_writer(&'a self) -> Log {
        self.clone()
    }
}
