//! `rollwright install` as an operator uses it: the printed manifests pass `kubectl apply
//! --dry-run=server`, their pods are admitted under Pod Security `restricted`, the ServiceAccount
//! holds its controllers' upstream roles and no more, and `rollwright controllers` running with
//! that ServiceAccount's token (as the installed pod would; there is no container runtime here)
//! rolls out a Deployment, a DaemonSet and a StatefulSet without a single refusal, serving /healthz, /readyz and /metrics.

use crate::common::{self, Cluster};
use rollwright::components::Components;

const NS: &str = "rollwright-system";
const SA: &str = "system:serviceaccount:rollwright-system:rollwright-controllers";

/// The cluster's own controllers minus the four `install` replaces, nodes and a scheduler: the
/// shape of a cluster whose kube-controller-manager runs with `--controllers='*,-deployment,...'`.
async fn cluster_without_workload_controllers() -> Cluster {
    Cluster::start_with(Components {
        nodes: Some(nodesim::NodeSim {
            nodes: 2,
            ..Default::default()
        }),
        scheduler: Some(Default::default()),
        controllers: Some(rollwright::components::ControllerSettings {
            enabled: "*,-deployment,-replicaset,-daemonset,-statefulset"
                .parse()
                .unwrap(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
}

/// The YAML documents of `rollwright install`'s output.
fn documents(yaml: &str) -> Vec<String> {
    yaml.split("\n---\n")
        .map(|d| d.trim_start_matches("---\n").to_owned())
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_manifests_apply_pass_restricted_and_grant_only_the_controllers_roles() {
    let c = cluster_without_workload_controllers().await;
    let printed = c.rollwright(&["install"]).await;
    assert!(
        printed.contains(
            "kube-controller-manager --controllers='*,-deployment,-replicaset,-daemonset,-statefulset'"
        ),
        "{printed}"
    );
    let docs = documents(&printed);
    assert!(docs[0].contains("kind: Namespace"), "{}", docs[0]);
    // The namespace must exist before a server-side dry run of what goes in it, as on any
    // cluster; then the whole stream, dry.
    c.kubectl_stdin(&["apply", "-f", "-"], &docs[0]).await;
    let out = c
        .kubectl_raw(&["apply", "--dry-run=server", "-f", "-"], Some(&printed))
        .await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Warning"), "{stderr}");
    for what in [
        "serviceaccount/rollwright-controllers",
        "clusterrolebinding.rbac.authorization.k8s.io/rollwright:controller:deployment-controller",
        "clusterrolebinding.rbac.authorization.k8s.io/rollwright:controller:statefulset-controller",
        "role.rbac.authorization.k8s.io/rollwright-controllers-leader-election",
        "deployment.apps/rollwright-controllers",
        "poddisruptionbudget.policy/rollwright-controllers",
    ] {
        assert!(
            stdout.contains(&format!("{what} created (server dry run)")),
            "{what}: {stdout}"
        );
    }

    // For real: the ReplicaSet's pods are admitted in the namespace that enforces `restricted`
    // (the cluster runs its own ReplicaSet controller until rollwright's takes over; here,
    // `rollwright controllers` below).
    c.kubectl_stdin(&["apply", "-f", "-"], &printed).await;
    let labels = c
        .kubectl(&[
            "get",
            "namespace",
            NS,
            "-o",
            "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
        ])
        .await;
    assert_eq!(labels, "restricted");
    // The pod template itself, as a Pod, admitted under enforcement (and, as a control, the same
    // pod without its security context refused).
    let template = c
        .kubectl_json(&[
            "-n",
            NS,
            "get",
            "deployment",
            "rollwright-controllers",
            "-o",
            "json",
        ])
        .await["spec"]["template"]
        .clone();
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "template-check", "namespace": NS},
        "spec": template["spec"],
    });
    let out = c
        .kubectl_raw(
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&pod.to_string()),
        )
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Warning"));
    let mut bare = pod.clone();
    bare["spec"]["securityContext"] = serde_json::json!({});
    bare["spec"]["containers"][0]["securityContext"] = serde_json::json!({});
    let out = c
        .kubectl_raw(
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&bare.to_string()),
        )
        .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("violates PodSecurity \"restricted:latest\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `--apply` applies the same (server-side, beside kubectl's ownership), and warns once the
    // cluster's own controller manager holds its Lease.
    let applied = c.rollwright(&["install", "--apply"]).await;
    assert!(
        applied.contains("Deployment/rollwright-controllers applied"),
        "{applied}"
    );
    let out = c.rollwright_raw(&["install", "--apply"], None).await;
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(c.admin_client(), "kube-system");
    let lease: k8s_openapi::api::coordination::v1::Lease =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kube-controller-manager"},
            "spec": {"holderIdentity": "master-0_1", "leaseDurationSeconds": 15},
        }))
        .unwrap();
    let mut lease = lease;
    if let Some(spec) = lease.spec.as_mut() {
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            jiff::Timestamp::now(),
        ));
    }
    leases.create(&Default::default(), &lease).await.unwrap();
    let out = c.rollwright_raw(&["install", "--apply"], None).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: the cluster's kube-controller-manager is running")
            && stderr.contains("--controllers='*,-deployment,-replicaset,-daemonset,-statefulset'"),
        "{stderr}"
    );

    // What the ServiceAccount may do: its controllers' writes, its Lease, its caches' reads; not
    // Secrets, not other Leases, not Deployments' deletion.
    let can = |args: &'static [&'static str]| {
        let c = &c;
        async move {
            let mut all = vec!["auth", "can-i", "--as", SA];
            all.extend_from_slice(args);
            String::from_utf8_lossy(&c.kubectl_raw(&all, None).await.stdout)
                .trim()
                .to_owned()
        }
    };
    for (args, want) in [
        (&["create", "pods", "-n", "default"][..], "yes"),
        (&["update", "deployments/status", "-n", "default"], "yes"),
        (
            &["create", "controllerrevisions.apps", "-n", "default"],
            "yes",
        ),
        (&["list", "nodes"], "yes"),
        (&["watch", "persistentvolumeclaims", "-A"], "yes"),
        (&["list", "namespaces"], "yes"),
        (
            &["update", "leases/rollwright-controllers", "-n", NS],
            "yes",
        ),
        (
            &[
                "update",
                "leases/kube-controller-manager",
                "-n",
                "kube-system",
            ],
            "no",
        ),
        (&["get", "secrets", "-n", "default"], "no"),
        (&["delete", "deployments", "-n", "default"], "no"),
    ] {
        assert_eq!(can(args).await, want, "can-i {args:?}");
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_with_the_installed_account_roll_out_without_refusals() {
    let c = cluster_without_workload_controllers().await;
    let printed = c.rollwright(&["install"]).await;
    c.kubectl_stdin(&["apply", "-f", "-"], &documents(&printed)[0])
        .await;
    c.kubectl_stdin(&["apply", "-f", "-"], &printed).await;
    // The installed pods cannot run here (no container runtime, no image): the process below
    // stands in for them.
    c.kubectl(&[
        "-n",
        NS,
        "scale",
        "deployment",
        "rollwright-controllers",
        "--replicas=0",
    ])
    .await;
    let token = c
        .kubectl(&["-n", NS, "create", "token", "rollwright-controllers"])
        .await;

    // In-cluster configuration as the pod would find it: the token and the CA at a path of the
    // test's, the API server's address as the kubelet puts it in the environment.
    let sa_dir = c.dir.path().join("serviceaccount");
    std::fs::create_dir_all(&sa_dir).unwrap();
    std::fs::write(sa_dir.join("token"), token.trim()).unwrap();
    std::fs::write(sa_dir.join("namespace"), NS).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(c.kubeconfig()).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.clone().unwrap();
    let ca = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        cluster.certificate_authority_data.unwrap(),
    )
    .unwrap();
    std::fs::write(sa_dir.join("ca.crt"), &ca).unwrap();
    let server: http::Uri = cluster.server.unwrap().parse().unwrap();
    let in_cluster = restclient::InCluster {
        host: server.host().unwrap().to_owned(),
        port: server.port_u16().unwrap().to_string(),
        dir: sa_dir.clone(),
    };
    let config = in_cluster.config().await.unwrap();
    assert_eq!(config.default_namespace, NS);
    let as_pod = restclient::client(config, Some(restclient::Limit::CONTROLLER_MANAGER)).unwrap();
    let review = as_pod
        .request_text(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("content-type", "application/json")
                .body(
                    br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#
                        .to_vec(),
                )
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(review.contains(SA), "{review}");

    // `rollwright controllers` as the installed Deployment runs it, with the ServiceAccount's
    // token (a kubeconfig holding it: the binary's in-cluster path reads the real mount).
    let admin = std::fs::read_to_string(c.kubeconfig()).unwrap();
    let token_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap();
    let sa_kubeconfig = c.dir.path().join("sa.kubeconfig");
    std::fs::write(
        &sa_kubeconfig,
        admin.replace(token_line, &format!("    token: {}", token.trim())),
    )
    .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let log = c.dir.path().join("controllers.log");
    let _controllers = tokio::process::Command::new(common::ROLLWRIGHT)
        .args([
            "controllers",
            "--controllers=deployment,replicaset,daemonset,statefulset",
            "--leader-elect-resource-namespace=rollwright-system",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--kubeconfig",
        ])
        .arg(&sa_kubeconfig)
        .env("RUST_LOG", "info,restclient=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    c.kubectl_stdin(
        &["apply", "-f", "-"],
        &common::deployment_yaml("web", 4, "nginx:1.27"),
    )
    .await;
    c.kubectl(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .await;
    c.kubectl(&["set", "image", "deployment/web", "app=nginx:1.28"])
        .await;
    c.kubectl(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .await;
    // A DaemonSet and a StatefulSet (with a claim template) roll out too: each controller's
    // writes are within its role.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: agent:1
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: db:1
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
"#,
    )
    .await;
    for what in ["daemonset/agent", "statefulset/db"] {
        c.kubectl(&["rollout", "status", what, "--timeout=90s"])
            .await;
    }
    c.kubectl(&["set", "image", "daemonset/agent", "agent=agent:2"])
        .await;
    c.kubectl(&["set", "image", "statefulset/db", "db=db:2"])
        .await;
    for what in ["daemonset/agent", "statefulset/db"] {
        c.kubectl(&["rollout", "status", what, "--timeout=90s"])
            .await;
    }

    // It leads through the Lease its Role grants.
    let holder = c
        .kubectl(&[
            "-n",
            NS,
            "get",
            "lease",
            "rollwright-controllers",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .await;
    assert!(holder.starts_with("rollwright-controllers-"), "{holder}");

    // Its status endpoint: healthy, ready, and its metrics count every response: none refused.
    let curl = |path: &str| {
        let url = format!("https://127.0.0.1:{port}{path}");
        async move {
            let out = tokio::process::Command::new("curl")
                .args(["-sk", "--max-time", "10", &url])
                .output()
                .await
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    assert_eq!(curl("/healthz").await, "ok");
    assert_eq!(curl("/readyz").await, "ok");
    let metrics = curl("/metrics").await;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        metrics.contains("leader_election_master_status{name=\"rollwright-controllers\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("rest_client_requests_total{code=\"201\",method=\"POST\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("code=\"403\""),
        "refused requests:\n{metrics}\nlog:\n{logged}"
    );
    assert!(!logged.contains("forbidden"), "{logged}");
    assert!(metrics.contains("# TYPE rest_client_rate_limiter_duration_seconds histogram"));
    c.stop().await;
}
