//! Real applications apply unchanged: the Kubernetes documentation's tutorial manifests
//! (`../shared/realworld/`), one object of every served kind, their `kubectl get` columns,
//! status writes per kind as upstream's status strategies keep them, and bad input.

use crate::common;

use common::Cluster;
use serde_json::{Value, json};

/// The tutorial manifests, relative to this crate.
fn realworld_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/realworld")
}

fn realworld_files() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(realworld_dir())
        .expect("the realworld manifests are beside the repository")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {:?}", realworld_dir());
    files
}

/// The Job of upstream's "Running an example Job" task, which server-side apply used to break
/// after a client-side apply: its generated selector and labels were counted as kubectl's.
const PI_JOB: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: pi
spec:
  template:
    spec:
      containers:
      - name: pi
        image: perl:5.34.0
        command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]
      restartPolicy: Never
  backoffLimit: 4
"#;

/// Each object `kubectl get -f path` shows, with its resourceVersion.
async fn versions(c: &Cluster, path: &str) -> Vec<(String, String)> {
    let list = c.kubectl_json(&["get", "-f", path, "-o", "json"]).await;
    let items = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![list]);
    items
        .iter()
        .map(|o| {
            (
                format!("{}/{}", o["kind"], o["metadata"]["name"]),
                o["metadata"]["resourceVersion"].to_string(),
            )
        })
        .collect()
}

/// Moving from client-side to server-side apply, as kubectl's documentation describes it: the
/// first server-side apply takes over kubectl's fields, and applying the same file again writes
/// nothing. Upstream's field manager counts only what a request sent and defaulting filled in as
/// its manager's, never what the kind's strategy generates (a Job's selector and labels).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_then_server_side_apply_twice_writes_once() {
    let c = Cluster::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let job = dir.path().join("job.yaml");
    std::fs::write(&job, PI_JOB).expect("job manifest");
    let mut files = realworld_files();
    files.push(job);
    for file in files {
        let path = file.to_string_lossy().to_string();
        c.kubectl(&["apply", "-f", &path]).await;
        for round in ["first", "second"] {
            let before = versions(&c, &path).await;
            let out = c
                .kubectl_raw(&["apply", "--server-side", "-f", &path], None)
                .await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.is_empty(),
                "{path}: {round} server-side apply: {stderr}"
            );
            if round == "second" {
                assert_eq!(versions(&c, &path).await, before, "{path}: a second write");
            }
        }
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_realworld_manifest_applies_unchanged() {
    let c = Cluster::start().await;
    for file in realworld_files() {
        let path = file.to_string_lossy().to_string();
        let text = std::fs::read_to_string(&file).expect("manifest");
        let out = c.kubectl(&["apply", "-f", &path]).await;
        let objects = text
            .split("\n---")
            .filter(|doc| doc.contains("kind:"))
            .count();
        assert_eq!(
            out.lines().filter(|l| l.ends_with(" created")).count(),
            objects,
            "{path}: {out}"
        );
        // Applying again changes nothing but what upstream's own apply also re-sends (a
        // StatefulSet's atomic volumeClaimTemplates list, which defaulting fills in).
        let again = c.kubectl(&["apply", "-f", &path]).await;
        for line in again.lines() {
            assert!(
                line.ends_with(" unchanged") || line.starts_with("statefulset.apps/"),
                "{path}: second apply: {line}"
            );
        }
    }
    let all = c.kubectl(&["get", "all", "-A"]).await;
    for want in [
        "service/frontend",
        "service/zk-hs",
        "deployment.apps/redis-leader",
        "daemonset.apps/fluentd-elasticsearch",
        "statefulset.apps/web",
        "statefulset.apps/zk",
        "service/kubernetes",
    ] {
        assert!(all.contains(want), "get all: {want} missing:\n{all}");
    }
    let svc = c.kubectl(&["get", "svc", "frontend", "nginx"]).await;
    let frontend = svc
        .lines()
        .find(|l| l.starts_with("frontend"))
        .unwrap_or("");
    let cells: Vec<&str> = frontend.split_whitespace().collect();
    assert_eq!(cells[1], "LoadBalancer", "{svc}");
    assert!(
        cells[2].starts_with("10."),
        "a cluster IP from 10.96.0.0/12: {svc}"
    );
    assert_eq!(cells[3], "<pending>", "{svc}");
    assert!(cells[4].starts_with("80:3"), "a node port: {svc}");
    assert!(
        svc.lines()
            .any(|l| l.starts_with("nginx") && l.contains(" None ")),
        "headless: {svc}"
    );
    let describe = c.kubectl(&["describe", "svc", "frontend"]).await;
    for want in [
        "Type:                     LoadBalancer",
        "Selector:                 app=guestbook,tier=frontend",
        "NodePort:",
        "Session Affinity:         None",
        "External Traffic Policy:  Cluster",
    ] {
        assert!(describe.contains(want), "describe: {want}:\n{describe}");
    }
    let pdb = c.kubectl(&["get", "pdb", "zk-pdb"]).await;
    assert!(
        pdb.lines().nth(1).is_some_and(
            |l| l.split_whitespace().collect::<Vec<_>>()[..4] == ["zk-pdb", "N/A", "1", "0"]
        ),
        "{pdb}"
    );
    c.stop().await;
}

/// The same manifests through server-side apply, as GitOps tools send them: created, then
/// applied again without any change (same resourceVersion), with `kubectl` owning the fields it
/// applied in `managedFields`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_realworld_manifest_applies_server_side_unchanged() {
    let c = Cluster::start().await;
    for file in realworld_files() {
        let path = file.to_string_lossy().to_string();
        let out = c.kubectl(&["apply", "--server-side", "-f", &path]).await;
        assert!(
            out.lines().all(|l| l.ends_with(" serverside-applied")),
            "{path}: {out}"
        );
        // What a second apply would change if it wrote: the spec, the generation and kubectl's
        // Apply entry (its time included). Status and resourceVersion move with the controllers.
        let applied = |list: &Value| -> Vec<Value> {
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| {
                    let apply: Vec<&Value> = o["metadata"]["managedFields"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|m| m["operation"] == "Apply")
                        .collect();
                    json!([
                        o["kind"],
                        o["metadata"]["name"],
                        o["metadata"]["generation"],
                        o["spec"],
                        apply
                    ])
                })
                .collect()
        };
        let before = c
            .kubectl_json(&["get", "-f", &path, "-o", "json", "--show-managed-fields"])
            .await;
        for item in before["items"].as_array().into_iter().flatten() {
            let managers: Vec<&str> = item["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["operation"] == "Apply")
                .filter_map(|m| m["manager"].as_str())
                .collect();
            assert_eq!(
                managers,
                ["kubectl"],
                "{path}: {}",
                item["metadata"]["name"]
            );
        }
        c.kubectl(&["apply", "--server-side", "-f", &path]).await;
        let after = c
            .kubectl_json(&["get", "-f", &path, "-o", "json", "--show-managed-fields"])
            .await;
        assert_eq!(
            applied(&before),
            applied(&after),
            "{path}: a second identical apply must not write"
        );
    }
    c.stop().await;
}

/// One object of every kind rollwright serves beyond the workloads.
const EVERY_KIND: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin}
data: {pass: c2VjcmV0}
---
apiVersion: v1
kind: Service
metadata: {name: edge}
spec:
  type: NodePort
  selector: {app: edge}
  ports: [{name: http, port: 80}, {name: https, port: 443, targetPort: 8443}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
---
apiVersion: v1
kind: Endpoints
metadata: {name: manual}
subsets: [{addresses: [{ip: 10.1.0.1}, {ip: 10.1.0.2}], ports: [{port: 80}]}]
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota}
spec: {hard: {pods: "10"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec: {limits: [{type: Container, default: {cpu: 500m}}]}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: tmpl}
template:
  metadata: {labels: {app: t}}
  spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 0
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-manual}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/pv-manual}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: manual-1, labels: {kubernetes.io/service-name: manual}}
addressType: IPv4
ports: [{port: 80}]
endpoints: [{addresses: [10.1.0.1]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: budget}
spec: {minAvailable: 50%, selector: {matchLabels: {app: edge}}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site}
spec:
  ingressClassName: nginx
  rules:
  - host: example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: edge, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {matchLabels: {app: edge}}, policyTypes: [Ingress]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: robot, namespace: default}, {kind: User, name: jane}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-reader}
rules: [{apiGroups: [""], resources: [nodes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: read-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-reader}
subjects: [{kind: Group, name: ops}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: edge}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: edge}
  maxReplicas: 5
---
apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: "perl:5.34"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: hello}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: hello, image: busybox}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: checks}
webhooks:
- name: check.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: "https://example.com/check"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutations}
webhooks: []
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec: {attachRequired: false}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-0}
spec: {drivers: [{name: csi.example.com, nodeID: node-0}]}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: cap}
storageClassName: standard
capacity: 10Gi
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: attach-1}
spec: {attacher: csi.example.com, nodeName: node-0, source: {persistentVolumeName: pv-manual}}
---
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: jane}
spec:
  request: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K
  signerName: kubernetes.io/kube-apiserver-client
  usages: [client auth]
"#;

/// (resource, header columns as kubectl prints them, the first row's leading cells).
const GETS: &[(&str, &str, &str)] = &[
    ("configmaps settings", "NAME DATA AGE", "settings 2"),
    ("secrets creds", "NAME TYPE DATA AGE", "creds Opaque 2"),
    (
        "services edge",
        "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
        "edge NodePort",
    ),
    ("serviceaccounts robot", "NAME SECRETS AGE", "robot 0"),
    (
        "endpoints manual",
        "NAME ENDPOINTS AGE",
        "manual 10.1.0.1:80,10.1.0.2:80",
    ),
    ("resourcequotas quota", "NAME AGE REQUEST LIMIT", "quota"),
    ("limitranges limits", "NAME CREATED AT", "limits"),
    (
        "podtemplates tmpl",
        "NAME CONTAINERS IMAGES POD LABELS",
        "tmpl c nginx:1.27 app=t",
    ),
    (
        "replicationcontrollers legacy",
        "NAME DESIRED CURRENT READY AGE",
        "legacy 0 0 0",
    ),
    (
        "persistentvolumes pv-manual",
        "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE",
        "pv-manual 2Gi RWO Retain Pending",
    ),
    (
        "endpointslices manual-1",
        "NAME ADDRESSTYPE PORTS ENDPOINTS AGE",
        "manual-1 IPv4 80 10.1.0.1",
    ),
    (
        "poddisruptionbudgets budget",
        "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
        "budget 50% N/A 0",
    ),
    (
        "ingressclasses nginx",
        "NAME CONTROLLER PARAMETERS AGE",
        "nginx k8s.io/ingress-nginx <none>",
    ),
    (
        "ingresses site",
        "NAME CLASS HOSTS ADDRESS PORTS AGE",
        "site nginx example.com 80",
    ),
    (
        "networkpolicies deny",
        "NAME POD-SELECTOR AGE",
        "deny app=edge",
    ),
    ("roles reader", "NAME CREATED AT", "reader"),
    (
        "rolebindings read-pods",
        "NAME ROLE AGE",
        "read-pods Role/reader",
    ),
    ("clusterroles node-reader", "NAME CREATED AT", "node-reader"),
    (
        "clusterrolebindings read-nodes",
        "NAME ROLE AGE",
        "read-nodes ClusterRole/node-reader",
    ),
    (
        "horizontalpodautoscalers edge",
        "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
        "edge Deployment/edge cpu: <unknown>/80% 1 5 0",
    ),
    (
        "jobs pi",
        "NAME STATUS COMPLETIONS DURATION AGE",
        "pi Running 0/1",
    ),
    (
        "cronjobs hello",
        "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE",
        "hello */5 * * * * <none> False 0 <none>",
    ),
    (
        "priorityclasses",
        "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
        "high 1000 false",
    ),
    (
        "validatingwebhookconfigurations checks",
        "NAME WEBHOOKS AGE",
        "checks 1",
    ),
    (
        "mutatingwebhookconfigurations mutations",
        "NAME WEBHOOKS AGE",
        "mutations 0",
    ),
    (
        "csidrivers csi.example.com",
        "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
        "csi.example.com false false false <unset> false Persistent",
    ),
    ("csinodes node-0", "NAME DRIVERS AGE", "node-0 1"),
    (
        "csistoragecapacities cap",
        "NAME STORAGECLASSNAME CAPACITY",
        "cap standard 10Gi",
    ),
    (
        "volumeattachments attach-1",
        "NAME ATTACHER PV NODE ATTACHED AGE",
        "attach-1 csi.example.com pv-manual node-0 false",
    ),
    (
        "certificatesigningrequests jane",
        "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION",
        "jane",
    ),
    (
        "storageclasses",
        "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
        "standard (default) rollwright.io/simulated Delete WaitForFirstConsumer false",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_served_and_printed_as_upstream_prints_it() {
    let c = Cluster::start().await;
    let out = c.kubectl_stdin(&["apply", "-f", "-"], EVERY_KIND).await;
    let objects = EVERY_KIND.matches("\nkind: ").count();
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" created")).count(),
        objects,
        "{out}"
    );
    for (what, header, first) in GETS {
        let mut args = vec!["get"];
        args.extend(what.split(' '));
        let table = c.kubectl(&args).await;
        let mut lines = table.lines();
        let got_header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
        assert_eq!(
            got_header.join(" "),
            *header,
            "kubectl get {what}:\n{table}"
        );
        let name = first.split(' ').next().unwrap_or("");
        let row = lines
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("kubectl get {what}: no row {name}:\n{table}"));
        let cells = row.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            cells.starts_with(first),
            "kubectl get {what}: {cells:?} does not start with {first:?}"
        );
    }
    // Upstream's defaults and assigned values, as a client reads them back.
    let secret = c
        .kubectl_json(&["get", "secret", "creds", "-o", "json"])
        .await;
    assert_eq!(
        secret["data"],
        json!({"pass": "c2VjcmV0", "user": "YWRtaW4="})
    );
    assert!(secret.get("stringData").is_none());
    let svc = c.kubectl_json(&["get", "svc", "edge", "-o", "json"]).await;
    let ports = svc["spec"]["ports"].as_array().cloned().unwrap_or_default();
    assert_eq!(ports[0]["targetPort"], 80);
    assert_eq!(ports[1]["targetPort"], 8443);
    for p in &ports {
        let n = p["nodePort"].as_i64().unwrap_or(0);
        assert!((30000..=32767).contains(&n), "{p}");
    }
    assert_eq!(svc["spec"]["clusterIPs"][0], svc["spec"]["clusterIP"]);
    let job = c.kubectl_json(&["get", "job", "pi", "-o", "json"]).await;
    let uid = job["metadata"]["uid"].clone();
    assert_eq!(
        job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(job["spec"]["backoffLimit"], 6);
    let pcs = c.kubectl(&["get", "priorityclasses"]).await;
    for system in ["system-node-critical", "system-cluster-critical"] {
        assert!(pcs.contains(system), "{pcs}");
    }
    // Both Event APIs see the same events.
    let core = c.kubectl_json(&["get", "--raw", "/api/v1/events"]).await;
    let v1 = c
        .kubectl_json(&["get", "--raw", "/apis/events.k8s.io/v1/events"])
        .await;
    assert_eq!(
        core["items"].as_array().map(Vec::len),
        v1["items"].as_array().map(Vec::len)
    );
    assert_eq!(v1["kind"], "EventList");
    assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
    let hpa_v1 = c
        .kubectl_json(&[
            "get",
            "--raw",
            "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/edge",
        ])
        .await;
    assert_eq!(hpa_v1["spec"]["targetCPUUtilizationPercentage"], 80);
    let resources = c.kubectl(&["api-resources"]).await;
    for want in [
        "services                            svc          v1                                true         Service",
        "horizontalpodautoscalers            hpa          autoscaling/v2                    true         HorizontalPodAutoscaler",
        "poddisruptionbudgets                pdb          policy/v1                         true         PodDisruptionBudget",
    ] {
        let want_cells: Vec<&str> = want.split_whitespace().collect();
        assert!(
            resources
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == want_cells),
            "api-resources lacks {want}:\n{resources}"
        );
    }
    let explain = c.kubectl(&["explain", "deployment.spec.strategy"]).await;
    for want in [
        "KIND:       Deployment",
        "FIELD: strategy <DeploymentStrategy>",
        "rollingUpdate\t<RollingUpdateDeployment>",
    ] {
        assert!(explain.contains(want), "explain: {want}:\n{explain}");
    }
    c.stop().await;
}

/// (resource/name, whether the request's labels, annotations and owner references are kept)
/// for a status write that also changes spec, labels, annotations and owner references, as
/// upstream's status strategies keep them.
const STATUS_WRITES: &[(&str, bool, bool, bool)] = &[
    ("deployment/web", false, true, true),
    ("replicaset/web-rs", true, true, true),
    ("service/edge", true, true, true),
    ("poddisruptionbudget/budget", true, true, true),
    ("job/pi", true, true, true),
    ("pod/lone", true, true, false),
];

/// A status field each kind has in upstream's types (a field it lacks is dropped, as decoding
/// into the Go type drops it), that no controller here rewrites: the patch, where to read it
/// back, and the value.
fn status_probe(target: &str) -> (serde_json::Value, &'static str, serde_json::Value) {
    match target.split('/').next().unwrap_or_default() {
        "service" => (
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}),
            "/status/loadBalancer/ingress/0/hostname",
            json!("lb.example.com"),
        ),
        "job" => (
            json!({"startTime": "2020-01-02T03:04:05Z"}),
            "/status/startTime",
            json!("2020-01-02T03:04:05Z"),
        ),
        _ => (
            json!({"observedGeneration": 42}),
            "/status/observedGeneration",
            json!(42),
        ),
    }
}

const STATUS_OBJECTS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs}
spec:
  replicas: 0
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: Service
metadata: {name: edge}
spec: {ports: [{port: 80}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: budget}
spec: {maxUnavailable: 1}
---
apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: "perl:5.34"}]
---
apiVersion: v1
kind: Pod
metadata: {name: lone}
spec:
  schedulerName: nobody
  containers: [{name: c, image: "nginx:1.27"}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_through_kubectl_keep_what_upstream_keeps() {
    let c = Cluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], STATUS_OBJECTS).await;
    for (target, keeps_labels, keeps_annotations, keeps_owners) in STATUS_WRITES {
        let before = c.kubectl_json(&["get", target, "-o", "json"]).await;
        let patch = json!({
            "metadata": {"labels": {"written": "by-status"}, "annotations": {"note": "by-status"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                    "uid": "00000000-0000-0000-0000-000000000001"}]},
            "spec": {"rollwrightProbe": "x"},
            "status": status_probe(target).0,
        })
        .to_string();
        c.kubectl(&[
            "patch",
            target,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ])
        .await;
        let after = c.kubectl_json(&["get", target, "-o", "json"]).await;
        assert_eq!(
            after["spec"], before["spec"],
            "{target}: spec is never written by status"
        );
        let (_, at, want) = status_probe(target);
        assert_eq!(after.pointer(at), Some(&want), "{target}: status written");
        assert_eq!(
            after["metadata"]["labels"]["written"] == "by-status",
            *keeps_labels,
            "{target}: labels"
        );
        assert_eq!(
            after["metadata"]["annotations"]["note"] == "by-status",
            *keeps_annotations,
            "{target}: annotations"
        );
        assert_eq!(
            after["metadata"]["ownerReferences"][0]["name"] == "owner",
            *keeps_owners,
            "{target}: owner references"
        );
        assert_eq!(
            after["metadata"].get("generation"),
            before["metadata"].get("generation"),
            "{target}: a status write never moves the generation"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_answered_as_upstream_answers_it() {
    let c = Cluster::start().await;
    // A kind nobody serves.
    let err = c
        .kubectl_fails(&["get", "--raw", "/apis/example.com/v1/widgets"], None)
        .await;
    assert!(
        err.contains(
            "Error from server (NotFound): the server could not find the requested resource"
        ),
        "{err}"
    );
    let err = c.kubectl_fails(&["get", "widgets"], None).await;
    assert!(
        err.contains("the server doesn't have a resource type \"widgets\""),
        "{err}"
    );
    // One bad object in a multi-document apply: the others are created, the bad one reported.
    let mixed = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: first}
data: {a: "1"}
---
apiVersion: v1
kind: Service
metadata: {name: broken}
spec: {ports: [{port: 0}]}
---
apiVersion: v1
kind: Secret
metadata: {name: last}
stringData: {k: v}
"#;
    let out = c.kubectl_raw(&["apply", "-f", "-"], Some(mixed)).await;
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("configmap/first created"), "{stdout}");
    assert!(stdout.contains("secret/last created"), "{stdout}");
    // Upstream defaults the target port to the port, so both are reported.
    for want in [
        "Service \"broken\" is invalid",
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
    ] {
        assert!(stderr.contains(want), "{want}: {stderr}");
    }
    c.kubectl(&["get", "configmap", "first"]).await;
    c.kubectl(&["get", "secret", "last"]).await;
    c.kubectl_fails(&["get", "service", "broken"], None).await;
    // A Secret with data that is not base64.
    let err = c
        .kubectl_fails(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: v1\nkind: Secret\nmetadata: {name: bad}\ndata: {k: \"not base64!\"}\n",
            ),
        )
        .await;
    assert!(
        err.contains("illegal base64") || err.contains("base64"),
        "{err}"
    );
    // The cluster IP of a Service never changes.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata: {name: fixed}\nspec: {ports: [{port: 80}]}\n",
    )
    .await;
    let err = c
        .kubectl_fails(
            &[
                "patch",
                "svc",
                "fixed",
                "--type=merge",
                "-p",
                r#"{"spec":{"clusterIP":"10.96.9.9"}}"#,
            ],
            None,
        )
        .await;
    assert!(err.contains("may not change once set"), "{err}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_in_a_terminating_namespace_are_forbidden_by_name() {
    let c = Cluster::start().await;
    c.kubectl(&["create", "namespace", "doomed"]).await;
    // A finalizer keeps the namespace terminating while its content waits.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: doomed, finalizers: [example.com/hold]}\n",
    )
    .await;
    c.kubectl(&["delete", "namespace", "doomed", "--wait=false"])
        .await;
    let err = c
        .kubectl_fails(&["create", "configmap", "late", "-n", "doomed"], None)
        .await;
    assert!(
        err.contains("configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"),
        "{err}"
    );
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "gen-", "namespace": "doomed"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}"#;
    let err = c.kubectl_fails(&["create", "-f", "-"], Some(pod)).await;
    assert!(err.contains("pods \"gen-\" is forbidden"), "{err}");
    c.kubectl(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "doomed",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uid_changes_are_refused_as_upstream_refuses_them() {
    let c = Cluster::start().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fixed}\ndata: {a: \"1\"}\n",
    )
    .await;
    // A PUT whose uid differs fails its uid precondition: 409.
    let mut cm: Value = c.kubectl_json(&["get", "cm", "fixed", "-o", "json"]).await;
    cm["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let out = c
        .kubectl_raw(&["replace", "-f", "-"], Some(&cm.to_string()))
        .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (Conflict)")
            && err.contains(
                "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000"
            ),
        "{err}"
    );
    // A patch that changes it is invalid: 422.
    let err = c
        .kubectl_fails(
            &[
                "patch",
                "cm",
                "fixed",
                "--type=merge",
                "-p",
                r#"{"metadata":{"uid":"x"}}"#,
            ],
            None,
        )
        .await;
    assert!(
        err.contains("metadata.uid: Invalid value: \"x\": field is immutable"),
        "{err}"
    );
    c.stop().await;
}
