//! Who gets in and what they may do, asked as upstream's users ask: `kubectl` with an admin
//! token, a client certificate, a ServiceAccount token, no credentials at all, and `--as`. Each
//! answer is the one kube-apiserver gives (its messages are quoted from its source).

use crate::common::Cluster;

/// A kubeconfig for `user` in `groups`, made by `rollwright kubeconfig`.
pub(crate) async fn user_kubeconfig(
    c: &Cluster,
    user: &str,
    groups: &[&str],
) -> std::path::PathBuf {
    let path = c
        .dir
        .path()
        .join(format!("{}.kubeconfig", user.replace(':', "_")));
    let mut args = vec!["kubeconfig", "--user", user, "-o"];
    let out_path = path.to_string_lossy().into_owned();
    args.push(&out_path);
    for g in groups {
        args.extend(["--group", g]);
    }
    let dir = c.dir.path().to_string_lossy().into_owned();
    args.extend(["--data-dir", &dir]);
    let out = c
        .run_raw(env!("CARGO_BIN_EXE_rollwright"), &args, None)
        .await;
    assert!(
        out.status.success(),
        "rollwright kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn each_credential_is_accepted_or_refused_as_upstream() {
    let c = Cluster::start().await;
    // The admin token: the bootstrap admin, in system:masters.
    let who = c
        .kubectl(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ])
        .await;
    assert_eq!(
        who,
        r#"rollwright-admin ["system:masters","system:authenticated"]"#
    );

    // A client certificate the cluster CA signed: CN the user, O the groups.
    let alice = user_kubeconfig(&c, "alice", &["devs"]).await;
    let alice_arg = alice.to_string_lossy().into_owned();
    let out = c
        .kubectl_raw(
            &[
                "--kubeconfig",
                &alice_arg,
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
            None,
        )
        .await;
    assert_eq!(
        stdout(&out),
        r#"alice ["devs","system:authenticated"]"#,
        "{}",
        stderr(&out)
    );

    // A ServiceAccount token from TokenRequest (`kubectl create token`).
    c.kubectl(&["create", "serviceaccount", "robot"]).await;
    let token = c.kubectl(&["create", "token", "robot"]).await;
    let out = c
        .kubectl_raw(
            &[
                "--token",
                token.trim(),
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
            None,
        )
        .await;
    assert_eq!(
        stdout(&out),
        "system:serviceaccount:default:robot",
        "{}",
        stderr(&out)
    );

    // A token nobody issued: 401, which kubectl words as it does for upstream's.
    let out = c
        .kubectl_raw(&["--token", "not-a-token", "get", "pods"], None)
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("error: You must be logged in to the server"),
        "{}",
        stderr(&out)
    );

    // No credentials: system:anonymous, which reaches only what upstream lets it reach.
    let bare = c.dir.path().join("anonymous.kubeconfig");
    let admin = std::fs::read_to_string(c.kubeconfig()).unwrap();
    // (A user with a name and no password: kubectl sends no credentials at all.)
    let token_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .unwrap();
    std::fs::write(&bare, admin.replace(token_line, "    username: nobody")).unwrap();
    let bare_arg = bare.to_string_lossy().into_owned();
    let out = c
        .kubectl_raw(
            &["--kubeconfig", &bare_arg, "get", "--raw", "/version"],
            None,
        )
        .await;
    assert!(out.status.success(), "anonymous /version: {}", stderr(&out));
    let out = c
        .kubectl_raw(
            &[
                "--kubeconfig",
                &bare_arg,
                "get",
                "--raw",
                "/api/v1/namespaces/default/pods",
            ],
            None,
        )
        .await;
    assert!(
        stderr(&out).contains(r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{}",
        stderr(&out)
    );
    c.stop().await;
}

#[tokio::test]
async fn a_service_account_reads_another_namespaces_secrets_only_once_bound() {
    let c = Cluster::start().await;
    for ns in ["team-a", "team-b"] {
        c.kubectl(&["create", "namespace", ns]).await;
    }
    c.kubectl(&["-n", "team-a", "create", "serviceaccount", "reader"])
        .await;
    c.kubectl(&[
        "-n",
        "team-b",
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=password=s3cret",
    ])
    .await;
    let token = c
        .kubectl(&["-n", "team-a", "create", "token", "reader"])
        .await;
    let token = token.trim();

    let out = c
        .kubectl_raw(&["--token", token, "-n", "team-b", "get", "secrets"], None)
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:team-a:reader" cannot list resource "secrets" in API group "" in the namespace "team-b""#),
        "{}",
        stderr(&out)
    );
    c.kubectl(&[
        "-n",
        "team-b",
        "create",
        "role",
        "secret-reader",
        "--verb=get,list",
        "--resource=secrets",
    ])
    .await;
    c.kubectl(&[
        "-n",
        "team-b",
        "create",
        "rolebinding",
        "reader",
        "--role=secret-reader",
        "--serviceaccount=team-a:reader",
    ])
    .await;
    let out = c
        .kubectl_raw(
            &[
                "--token", token, "-n", "team-b", "get", "secrets", "-o", "name",
            ],
            None,
        )
        .await;
    assert_eq!(stdout(&out), "secret/db\n", "{}", stderr(&out));
    // Still nothing elsewhere.
    let out = c
        .kubectl_raw(&["--token", token, "-n", "default", "get", "secrets"], None)
        .await;
    assert!(!out.status.success());

    // `can-i` answers from the same rules, for the admin asking `--as` the account.
    let sa = "system:serviceaccount:team-a:reader";
    let yes = c
        .kubectl_raw(
            &[
                "auth", "can-i", "list", "secrets", "-n", "team-b", "--as", sa,
            ],
            None,
        )
        .await;
    assert_eq!(stdout(&yes).trim(), "yes");
    let no = c
        .kubectl_raw(
            &[
                "auth", "can-i", "delete", "secrets", "-n", "team-b", "--as", sa,
            ],
            None,
        )
        .await;
    assert_eq!(stdout(&no).trim(), "no");
    let list = c
        .kubectl(&["auth", "can-i", "--list", "-n", "team-b", "--as", sa])
        .await;
    let secrets_row = list
        .lines()
        .find(|l| l.starts_with("secrets "))
        .unwrap_or_else(|| panic!("no secrets row in:\n{list}"));
    assert!(
        secrets_row
            .split_whitespace()
            .any(|w| w == "[get" || w == "[list"),
        "{secrets_row}"
    );
    assert!(secrets_row.contains("[get list]"), "{secrets_row}");
    c.stop().await;
}

#[tokio::test]
async fn deleting_the_pod_a_token_is_bound_to_revokes_the_token() {
    let c = Cluster::start().await;
    c.kubectl(&["create", "serviceaccount", "bound"]).await;
    // A token is bound only to a pod that runs as its ServiceAccount.
    let pod = crate::common::pod_yaml("holder", &[("app", "holder")])
        .replace("spec:\n", "spec:\n  serviceAccountName: bound\n");
    c.kubectl_stdin(&["apply", "-f", "-"], &pod).await;
    let token = c
        .kubectl(&[
            "create",
            "token",
            "bound",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "holder",
        ])
        .await;
    let whoami = [
        "--token",
        token.trim(),
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.extra.authentication\\.kubernetes\\.io/pod-name}",
    ];
    let out = c.kubectl_raw(&whoami, None).await;
    assert_eq!(stdout(&out), r#"["holder"]"#, "{}", stderr(&out));
    c.kubectl(&["delete", "pod", "holder", "--grace-period=0", "--force"])
        .await;
    let out = c.kubectl_raw(&whoami, None).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("Unauthorized"), "{}", stderr(&out));
    c.stop().await;
}

#[tokio::test]
async fn a_user_with_edit_cannot_grant_admin() {
    // `edit` and `admin` hold the rules aggregated into them (upstream's bootstrap roles are
    // empty until the clusterrole-aggregation controller fills them).
    let c = Cluster::with_controllers(&["clusterrole-aggregation"]).await;
    for role in ["edit", "admin"] {
        let mut rules = c.kubectl_spawn(&[
            "get",
            "clusterrole",
            role,
            "-w",
            "-o",
            "jsonpath={.rules[*].resources}{\"\\n\"}",
        ]);
        rules
            .until(&format!("{role} aggregated"), |l| l.contains("configmaps"))
            .await;
    }
    c.kubectl(&["create", "namespace", "shop"]).await;
    c.kubectl(&[
        "-n",
        "shop",
        "create",
        "rolebinding",
        "bob-edit",
        "--clusterrole=edit",
        "--user=bob",
    ])
    .await;
    let bob = user_kubeconfig(&c, "bob", &[]).await;
    let bob = bob.to_string_lossy().into_owned();
    // edit does what edit may.
    c.kubectl(&[
        "--kubeconfig",
        &bob,
        "-n",
        "shop",
        "create",
        "configmap",
        "settings",
        "--from-literal=a=b",
    ])
    .await;
    // But neither binds admin nor writes a role holding more than edit.
    let out = c
        .kubectl_raw(
            &[
                "--kubeconfig",
                &bob,
                "-n",
                "shop",
                "create",
                "rolebinding",
                "bob-admin",
                "--clusterrole=admin",
                "--user=bob",
            ],
            None,
        )
        .await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io is forbidden: User "bob" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "shop""#),
        "edit holds no rolebindings create, so the authorizer refuses it first (a create names no object in its URL, so upstream's message names none): {err}"
    );
    // Who may write bindings may still grant only what they hold: a namespace admin cannot bind
    // cluster-admin (upstream's escalation check).
    c.kubectl(&[
        "-n",
        "shop",
        "create",
        "rolebinding",
        "carol-admin",
        "--clusterrole=admin",
        "--user=carol",
    ])
    .await;
    let carol = user_kubeconfig(&c, "carol", &[]).await;
    let carol = carol.to_string_lossy().into_owned();
    c.kubectl(&[
        "--kubeconfig",
        &carol,
        "-n",
        "shop",
        "create",
        "rolebinding",
        "bob-view",
        "--clusterrole=view",
        "--user=bob",
    ])
    .await;
    let out = c
        .kubectl_raw(
            &[
                "--kubeconfig",
                &carol,
                "-n",
                "shop",
                "create",
                "rolebinding",
                "carol-root",
                "--clusterrole=cluster-admin",
                "--user=carol",
            ],
            None,
        )
        .await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "carol-root" is forbidden: user "carol" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#),
        "{err}"
    );
    c.stop().await;
}

#[tokio::test]
async fn an_aggregated_cluster_role_gains_the_rules_of_a_new_one() {
    let c = Cluster::with_controllers(&["clusterrole-aggregation"]).await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring: "true"
rules: []
"#,
    )
    .await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-endpoints
  labels:
    rbac.example.com/aggregate-to-monitoring: "true"
rules:
- apiGroups: [""]
  resources: ["services", "endpoints", "pods"]
  verbs: ["get", "list", "watch"]
"#,
    )
    .await;
    let out = c
        .kubectl(&[
            "wait",
            "clusterrole/monitoring",
            "--for=jsonpath={.rules[0].resources[1]}=endpoints",
            "--timeout=60s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");
    c.stop().await;
}

#[tokio::test]
async fn pod_security_enforces_and_warns_as_upstream() {
    let c = Cluster::start().await;
    c.kubectl(&["create", "namespace", "locked"]).await;
    c.kubectl(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=baseline",
    ])
    .await;
    let pod = r#"apiVersion: v1
kind: Pod
metadata:
  name: hostnet
  namespace: locked
spec:
  hostNetwork: true
  containers:
  - name: c
    image: nginx
"#;
    let err = c.kubectl_fails(&["apply", "-f", "-"], Some(pod)).await;
    assert!(
        err.contains(r#"pods "hostnet" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#),
        "{err}"
    );
    // A workload is admitted (enforcement is for pods) with upstream's warning.
    let out = c
        .kubectl_raw(
            &["apply", "-n", "locked", "-f", "-"],
            Some(
                &crate::common::deployment_yaml("web", 1, "nginx")
                    .replace("containers:", "hostNetwork: true\n      containers:"),
            ),
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"Warning: would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#),
        "{}",
        stderr(&out)
    );
    c.stop().await;
}
