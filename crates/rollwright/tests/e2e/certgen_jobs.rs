//! Certificate-generating Jobs (issue 37): ingress-nginx's `kube-webhook-certgen create` and
//! `patch` Jobs, as its deploy manifest has them (v1.8.2, abridged to the admission webhook's
//! objects and the controller's Deployment), write the Secret with a CA and a serving
//! certificate for the named hosts and set the ValidatingWebhookConfiguration's caBundle to
//! that CA, as the Job's ServiceAccount; the controller's pod, which mounts the Secret, starts
//! once it exists. A Job whose ServiceAccount may not create Secrets fails, as the real tool's
//! fatal log ends its run.

use crate::common;

use common::Cluster;
use nodesim::{NodeSim, distribution::Distribution};
use rollwright::components::Components;
use std::time::Duration;

async fn cluster() -> Cluster {
    Cluster::start_with(Components {
        nodes: Some(NodeSim {
            nodes: 2,
            heartbeat_interval: Duration::from_millis(500),
            start_delay: Distribution::Fixed(Duration::from_millis(100)),
            readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
            grace_scale: 0.0,
            backoff_scale: 0.01,
            ..Default::default()
        }),
        profile: None,
        scheduler: Some(Default::default()),
        controllers: Some(Default::default()),
    })
    .await
}

/// ingress-nginx's deploy manifest (controller-v1.8.2, `deploy/static/provider/cloud`): the
/// admission webhook's ServiceAccount, its Role and ClusterRole with their bindings, the
/// ValidatingWebhookConfiguration, the two certgen Jobs, and the controller's Deployment
/// reduced to what mounts the Secret.
const INGRESS_NGINX: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: ingress-nginx, labels: {app.kubernetes.io/instance: ingress-nginx, app.kubernetes.io/name: ingress-nginx}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ingress-nginx-admission}
rules:
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ingress-nginx-admission}
subjects:
- {kind: ServiceAccount, name: ingress-nginx-admission, namespace: ingress-nginx}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ingress-nginx-admission}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ingress-nginx-admission}
subjects:
- {kind: ServiceAccount, name: ingress-nginx-admission, namespace: ingress-nginx}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: ingress-nginx-admission}
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: ingress-nginx-controller-admission, namespace: ingress-nginx, path: /networking/v1/ingresses}
  failurePolicy: Fail
  matchPolicy: Equivalent
  name: validate.nginx.ingress.kubernetes.io
  rules:
  - apiGroups: [networking.k8s.io]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [ingresses]
  sideEffects: None
---
apiVersion: batch/v1
kind: Job
metadata: {name: ingress-nginx-admission-create, namespace: ingress-nginx}
spec:
  template:
    metadata: {name: ingress-nginx-admission-create}
    spec:
      containers:
      - args:
        - create
        - --host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.$(POD_NAMESPACE).svc
        - --namespace=$(POD_NAMESPACE)
        - --secret-name=ingress-nginx-admission
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef: {fieldPath: metadata.namespace}
        image: registry.k8s.io/ingress-nginx/kube-webhook-certgen:v20230407@sha256:543c40fd093964bc9ab509d3e791f9989963021f1e9e4c9c7b6700b02bfb227b
        imagePullPolicy: IfNotPresent
        name: create
        securityContext: {allowPrivilegeEscalation: false}
      nodeSelector: {kubernetes.io/os: linux}
      restartPolicy: OnFailure
      securityContext: {fsGroup: 2000, runAsNonRoot: true, runAsUser: 2000}
      serviceAccountName: ingress-nginx-admission
---
apiVersion: batch/v1
kind: Job
metadata: {name: ingress-nginx-admission-patch, namespace: ingress-nginx}
spec:
  template:
    metadata: {name: ingress-nginx-admission-patch}
    spec:
      containers:
      - args:
        - patch
        - --webhook-name=ingress-nginx-admission
        - --namespace=$(POD_NAMESPACE)
        - --patch-mutating=false
        - --secret-name=ingress-nginx-admission
        - --patch-failure-policy=Fail
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef: {fieldPath: metadata.namespace}
        image: registry.k8s.io/ingress-nginx/kube-webhook-certgen:v20230407@sha256:543c40fd093964bc9ab509d3e791f9989963021f1e9e4c9c7b6700b02bfb227b
        imagePullPolicy: IfNotPresent
        name: patch
        securityContext: {allowPrivilegeEscalation: false}
      nodeSelector: {kubernetes.io/os: linux}
      restartPolicy: OnFailure
      securityContext: {fsGroup: 2000, runAsNonRoot: true, runAsUser: 2000}
      serviceAccountName: ingress-nginx-admission
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
spec:
  selector:
    matchLabels: {app.kubernetes.io/component: controller, app.kubernetes.io/name: ingress-nginx}
  template:
    metadata:
      labels: {app.kubernetes.io/component: controller, app.kubernetes.io/name: ingress-nginx}
    spec:
      containers:
      - args: [/nginx-ingress-controller, --validating-webhook=:8443, --validating-webhook-certificate=/usr/local/certificates/cert, --validating-webhook-key=/usr/local/certificates/key]
        image: registry.k8s.io/ingress-nginx/controller:v1.8.2
        name: controller
        ports:
        - {containerPort: 8443, name: webhook, protocol: TCP}
        volumeMounts:
        - {mountPath: /usr/local/certificates/, name: webhook-cert, readOnly: true}
      nodeSelector: {kubernetes.io/os: linux}
      volumes:
      - name: webhook-cert
        secret: {secretName: ingress-nginx-admission}
"#;

fn decoded(secret: &serde_json::Value, key: &str) -> String {
    use base64::Engine as _;
    let b64 = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}: {secret}"));
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_nginx_certgen_jobs_write_the_secret_and_the_ca_bundle() {
    let c = cluster().await;
    c.kubectl_stdin(&["apply", "-f", "-"], INGRESS_NGINX).await;
    for job in [
        "ingress-nginx-admission-create",
        "ingress-nginx-admission-patch",
    ] {
        c.kubectl(&[
            "wait",
            "-n",
            "ingress-nginx",
            "--for=condition=Complete",
            &format!("job/{job}"),
            "--timeout=120s",
        ])
        .await;
    }
    let secret = c
        .kubectl_json(&[
            "get",
            "secret",
            "-n",
            "ingress-nginx",
            "ingress-nginx-admission",
            "-o",
            "json",
        ])
        .await;
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ca", "cert", "key"], "{secret}");
    let ca = decoded(&secret, "ca");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(decoded(&secret, "key").contains("PRIVATE KEY-----"));
    // The serving certificate names the hosts: `openssl`-free, read its SANs from its DER.
    let cert = decoded(&secret, "cert");
    let der = pem_body(&cert);
    for host in [
        "ingress-nginx-controller-admission",
        "ingress-nginx-controller-admission.ingress-nginx.svc",
    ] {
        assert!(
            der.windows(host.len()).any(|w| w == host.as_bytes()),
            "{host} not in the certificate"
        );
    }
    let vwc = c
        .kubectl_json(&[
            "get",
            "validatingwebhookconfiguration",
            "ingress-nginx-admission",
            "-o",
            "json",
        ])
        .await;
    let hook = &vwc["webhooks"][0];
    assert_eq!(
        hook["clientConfig"]["caBundle"], secret["data"]["ca"],
        "{vwc}"
    );
    assert_eq!(hook["failurePolicy"], "Fail");
    // The controller mounts the Secret: it starts.
    c.kubectl(&[
        "wait",
        "-n",
        "ingress-nginx",
        "--for=condition=Available",
        "deployment/ingress-nginx-controller",
        "--timeout=120s",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certgen_job_without_the_rights_fails_and_writes_nothing() {
    let c = cluster().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: certgen, namespace: default}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: create
        image: registry.k8s.io/ingress-nginx/kube-webhook-certgen:v20230407
        args: [create, --host=svc, --namespace=default, --secret-name=denied]
"#,
    )
    .await;
    c.kubectl(&[
        "wait",
        "--for=condition=Failed",
        "job/certgen",
        "--timeout=120s",
    ])
    .await;
    let pods = c
        .kubectl_json(&["get", "pods", "-l", "job-name=certgen", "-o", "json"])
        .await;
    let state = &pods["items"][0]["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(state["exitCode"], 1, "{pods}");
    let err = c.kubectl_fails(&["get", "secret", "denied"], None).await;
    assert!(err.contains("NotFound"), "{err}");
}

/// The DER bytes of a PEM block.
fn pem_body(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contour_certgen_writes_contourcert_and_envoycert() {
    let c = cluster().await;
    // Contour's example manifest's certgen Job (`examples/contour/02-job-certgen.yaml`), its
    // ServiceAccount's Role as there.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: projectcontour}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: contour-certgen, namespace: projectcontour}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: contour-certgen, namespace: projectcontour}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: contour, namespace: projectcontour}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: contour-certgen}
subjects:
- {kind: ServiceAccount, name: contour-certgen, namespace: projectcontour}
---
apiVersion: batch/v1
kind: Job
metadata: {name: contour-certgen-v1-27-0, namespace: projectcontour}
spec:
  template:
    metadata:
      labels: {app: contour-certgen}
    spec:
      containers:
      - name: contour
        image: ghcr.io/projectcontour/contour:v1.27.0
        imagePullPolicy: IfNotPresent
        command: [contour, certgen, --kube, --incluster, --overwrite, --secrets-format=compact, --namespace=$(CONTOUR_NAMESPACE)]
        env:
        - name: CONTOUR_NAMESPACE
          valueFrom:
            fieldRef: {fieldPath: metadata.namespace}
      restartPolicy: Never
      serviceAccountName: contour-certgen
      securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534}
  parallelism: 1
  completions: 1
  backoffLimit: 1
"#,
    )
    .await;
    c.kubectl(&[
        "wait",
        "-n",
        "projectcontour",
        "--for=condition=Complete",
        "job/contour-certgen-v1-27-0",
        "--timeout=120s",
    ])
    .await;
    for name in ["contourcert", "envoycert"] {
        let s = c
            .kubectl_json(&["get", "secret", "-n", "projectcontour", name, "-o", "json"])
            .await;
        assert_eq!(s["type"], "kubernetes.io/tls", "{s}");
        assert_eq!(s["metadata"]["labels"]["app"], "contour");
        let keys: Vec<&String> = s["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"], "{s}");
        let service = name.trim_end_matches("cert");
        let der = pem_body(&decoded(&s, "tls.crt"));
        let host = format!("{service}.projectcontour.svc.cluster.local");
        assert!(
            der.windows(host.len()).any(|w| w == host.as_bytes()),
            "{host}"
        );
    }
}
