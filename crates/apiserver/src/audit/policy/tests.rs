//! Upstream's `checker_test.go` and `reader_test.go` cases, and the validation messages.

use super::*;
use authz::UserInfo;

fn tim() -> UserInfo {
    UserInfo::new("tim@k8s.io", &["humans", "developers"])
}

fn request(name: &str) -> Attributes {
    let resource =
        |ns: &str, group: &str, version: &str, res: &str, sub: &str, n: &str| Attributes {
            user: tim(),
            verb: "get".into(),
            resource_request: true,
            api_group: group.into(),
            api_version: version.into(),
            resource: res.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: n.into(),
            path: String::new(),
        };
    match name {
        "namespaced" => resource("default", "", "v1", "pods", "", "busybox"),
        "cluster" => resource(
            "",
            "rbac.authorization.k8s.io",
            "v1beta1",
            "clusterroles",
            "",
            "edit",
        ),
        "nonResource" => Attributes {
            user: tim(),
            verb: "get".into(),
            path: "/logs/kubelet.log".into(),
            ..Default::default()
        },
        "subresource" => resource("default", "", "v1", "pods", "log", "busybox"),
        "Unauthorized" => Attributes {
            user: UserInfo::default(),
            ..resource("default", "", "v1", "pods", "", "busybox")
        },
        other => panic!("no request {other}"),
    }
}

/// Upstream's named rules, as policy YAML.
fn rule(name: &str) -> &'static str {
    match name {
        "default" => "{level: Metadata}",
        "create" => "{level: Request, verbs: [create]}",
        "tims" => "{level: Metadata, users: [tim@k8s.io]}",
        "humans" => "{level: Metadata, userGroups: [humans]}",
        "serviceAccounts" => "{level: Request, userGroups: ['system:serviceaccounts']}",
        "getPods" => "{level: RequestResponse, verbs: [get], resources: [{resources: [pods]}]}",
        "getPodLogs" => "{level: Request, verbs: [get], resources: [{resources: [pods/log]}]}",
        "getPodWildcardMatching" => {
            "{level: Request, verbs: [get], resources: [{resources: ['*']}]}"
        }
        "getPodResourceWildcardMatching" => {
            "{level: Request, verbs: [get], resources: [{resources: ['*/log']}]}"
        }
        "getPodSubResourceWildcardMatching" => {
            "{level: Request, verbs: [get], resources: [{resources: ['pods/*']}]}"
        }
        "getClusterRoles" => {
            "{level: RequestResponse, verbs: [get], resources: [{group: rbac.authorization.k8s.io, resources: [clusterroles]}], namespaces: ['']}"
        }
        "getLogs" => "{level: RequestResponse, verbs: [get], nonResourceURLs: ['/logs*']}",
        "getMetrics" => "{level: Request, verbs: [get], nonResourceURLs: [/metrics]}",
        "clusterRoleEdit" => {
            "{level: Request, resources: [{group: rbac.authorization.k8s.io, resources: [clusterroles], resourceNames: [edit]}]}"
        }
        "omit RequestReceived" => "{level: Request, omitStages: [RequestReceived]}",
        "only audit panic" => {
            "{level: Request, omitStages: [RequestReceived, ResponseStarted, ResponseComplete]}"
        }
        other => panic!("no rule {other}"),
    }
}

fn policy(policy_stages: &[Stage], rules: &[&str]) -> Policy {
    let stages: Vec<&str> = policy_stages.iter().map(|s| s.name()).collect();
    let mut yaml = format!(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [{}]\nrules:\n",
        stages.join(", ")
    );
    for r in rules {
        yaml.push_str(&format!("- {}\n", rule(r)));
    }
    Policy::from_bytes(yaml.as_bytes()).unwrap()
}

#[track_caller]
fn check(req: &str, level: Level, policy_stages: &[Stage], omit: &[Stage], rules: &[&str]) {
    let got = policy(policy_stages, rules).evaluate(&request(req));
    assert_eq!(got.level, level, "request {req}, rules {rules:?}");
    assert_eq!(
        got.omit_stages,
        omit.iter().copied().collect::<Stages>(),
        "request {req}, rules {rules:?}"
    );
}

fn levels(stages: &[Stage]) {
    use Level::*;
    let s = stages;
    check("namespaced", Metadata, s, s, &["default"]);
    check("namespaced", None, s, s, &["create"]);
    check("namespaced", Metadata, s, s, &["tims"]);
    check("namespaced", Metadata, s, s, &["humans"]);
    check("namespaced", None, s, s, &["serviceAccounts"]);
    check("namespaced", RequestResponse, s, s, &["getPods"]);
    check("namespaced", None, s, s, &["getClusterRoles"]);
    check("namespaced", None, s, s, &["getLogs"]);
    check("namespaced", None, s, s, &["getMetrics"]);
    check(
        "namespaced",
        Metadata,
        s,
        s,
        &["getMetrics", "serviceAccounts", "default"],
    );
    check(
        "namespaced",
        RequestResponse,
        s,
        s,
        &["getMetrics", "getPods", "default"],
    );
    check(
        "namespaced",
        RequestResponse,
        s,
        s,
        &["getPodLogs", "getPods"],
    );

    check("cluster", Metadata, s, s, &["default"]);
    check("cluster", None, s, s, &["create"]);
    check("cluster", Metadata, s, s, &["tims"]);
    check("cluster", Metadata, s, s, &["humans"]);
    check("cluster", None, s, s, &["serviceAccounts"]);
    check("cluster", None, s, s, &["getPods"]);
    check("cluster", RequestResponse, s, s, &["getClusterRoles"]);
    check(
        "cluster",
        Request,
        s,
        s,
        &["clusterRoleEdit", "getClusterRoles"],
    );
    check("cluster", None, s, s, &["getLogs"]);
    check("cluster", None, s, s, &["getMetrics"]);
    check(
        "cluster",
        Metadata,
        s,
        s,
        &["getMetrics", "serviceAccounts", "default"],
    );
    check(
        "cluster",
        RequestResponse,
        s,
        s,
        &["getMetrics", "getClusterRoles", "default"],
    );
    check("cluster", None, s, s, &["getPodLogs", "getPods"]);

    check("nonResource", Metadata, s, s, &["default"]);
    check("nonResource", None, s, s, &["create"]);
    check("nonResource", Metadata, s, s, &["tims"]);
    check("nonResource", Metadata, s, s, &["humans"]);
    check("nonResource", None, s, s, &["serviceAccounts"]);
    check("nonResource", None, s, s, &["getPods"]);
    check("nonResource", None, s, s, &["getClusterRoles"]);
    check("nonResource", RequestResponse, s, s, &["getLogs"]);
    check("nonResource", None, s, s, &["getMetrics"]);
    check(
        "nonResource",
        Metadata,
        s,
        s,
        &["getMetrics", "serviceAccounts", "default"],
    );
    check(
        "nonResource",
        RequestResponse,
        s,
        s,
        &["getLogs", "getClusterRoles", "default"],
    );
    check("nonResource", None, s, s, &["getPodLogs", "getPods"]);

    check("subresource", Request, s, s, &["getPodLogs", "getPods"]);
    check("subresource", Request, s, s, &["getPodWildcardMatching"]);
    check(
        "subresource",
        Request,
        s,
        s,
        &["getPodResourceWildcardMatching"],
    );
    check(
        "subresource",
        Request,
        s,
        s,
        &["getPodSubResourceWildcardMatching"],
    );

    check("Unauthorized", None, s, s, &["tims"]);
    check("Unauthorized", Metadata, s, s, &["tims", "default"]);
    check("Unauthorized", None, s, s, &["humans"]);
    check("Unauthorized", Metadata, s, s, &["humans", "default"]);
}

#[test]
fn first_matching_rule_decides_the_level() {
    use Stage::*;
    levels(&[]);
    let received = [RequestReceived];
    let all_but_panic = [RequestReceived, ResponseStarted, ResponseComplete];
    for req in ["namespaced", "cluster", "nonResource"] {
        check(
            req,
            Level::Request,
            &[],
            &received,
            &["omit RequestReceived", "getPods", "default"],
        );
        check(
            req,
            Level::Request,
            &[],
            &all_but_panic,
            &["only audit panic", "getPods", "default"],
        );
    }
}

#[test]
fn policy_omit_stages_join_each_rules() {
    use Stage::*;
    let policy_stages = [RequestReceived, ResponseStarted];
    levels(&policy_stages);
    let all_but_panic = [RequestReceived, ResponseStarted, ResponseComplete];
    for req in ["namespaced", "cluster"] {
        check(
            req,
            Level::Request,
            &policy_stages,
            &policy_stages,
            &["omit RequestReceived", "getPods", "default"],
        );
    }
    check(
        "nonResource",
        Level::Metadata,
        &policy_stages,
        &policy_stages,
        &["default", "omit RequestReceived", "getPods"],
    );
    for req in ["namespaced", "cluster", "nonResource"] {
        check(
            req,
            Level::Request,
            &policy_stages,
            &all_but_panic,
            &["only audit panic", "getPods", "default"],
        );
    }
}

#[test]
fn a_rules_omit_managed_fields_overrides_the_policys() {
    let cases = [
        ("false", "", false),
        ("true", "", true),
        ("true", ", omitManagedFields: false", false),
        ("false", ", omitManagedFields: true", true),
    ];
    let attrs = Attributes {
        verb: "get".into(),
        ..Default::default()
    };
    for (global, rule, want) in cases {
        let yaml = format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitManagedFields: {global}\nrules:\n- {{level: RequestResponse, verbs: [get]{rule}}}\n"
        );
        let got = Policy::from_bytes(yaml.as_bytes())
            .unwrap()
            .evaluate(&attrs);
        assert_eq!(got.omit_managed_fields, want, "{global} {rule}");
    }
}

const UPSTREAM_POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    nonResourceURLs:
      - /healthz*
      - /version
  - level: RequestResponse
    users: ["tim"]
    userGroups: ["testers", "developers"]
    verbs: ["patch", "delete", "create"]
    resources:
      - group: ""
      - group: "rbac.authorization.k8s.io"
        resources: ["clusterroles", "clusterrolebindings"]
    namespaces: ["default", "kube-system"]
  - level: Metadata
"#;

#[test]
fn reads_upstreams_example_policy() {
    let p = Policy::from_bytes(UPSTREAM_POLICY.as_bytes()).unwrap();
    assert_eq!(p.rules.len(), 3);
    let healthz = Attributes {
        verb: "get".into(),
        path: "/healthz/etcd".into(),
        ..Default::default()
    };
    assert_eq!(p.evaluate(&healthz).level, Level::None);
    let create = Attributes {
        user: UserInfo::new("tim", &["developers"]),
        verb: "create".into(),
        resource_request: true,
        api_version: "v1".into(),
        resource: "configmaps".into(),
        namespace: "kube-system".into(),
        ..Default::default()
    };
    assert_eq!(p.evaluate(&create).level, Level::RequestResponse);
    let elsewhere = Attributes {
        namespace: "other".into(),
        ..create
    };
    assert_eq!(p.evaluate(&elsewhere).level, Level::Metadata);
}

#[test]
fn reads_json_too() {
    let json = r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata"}]}"#;
    let p = Policy::from_bytes(json.as_bytes()).unwrap();
    assert_eq!(p.evaluate(&Attributes::default()).level, Level::Metadata);
}

#[test]
fn unknown_fields_are_tolerated_as_upstream_falls_back_to_lenient_decoding() {
    let yaml = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources:
    - "leases"
    verbs: ["watch", "get", "list"] # invalid indentation on verbs
"#;
    Policy::from_bytes(yaml.as_bytes()).unwrap();
    let doc: Value = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(unknown_fields(&doc), ["rules[0].resources[0].verbs"]);
}

#[test]
fn bad_policies_are_refused_with_upstreams_messages() {
    let cases: &[(&str, &str)] = &[
        (
            "rules:\n- level: None\n",
            "unknown group version field /, Kind= in policy",
        ),
        (
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n",
            "unknown group version field audit.k8s.io/v1beta1, Kind=Policy in policy",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n",
            "loaded illegal policy with 0 rules",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- users: [a]\n",
            "rules[0].level: Required value",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n",
            r#"rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse""#,
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Done]\nrules:\n- level: None\n",
            r#"omitStages[0]: Invalid value: "Done": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic"#,
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [healthz, '/a*b']\n",
            r#"[rules[0].nonResourceURLs[0]: Invalid value: "healthz": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: "/a*b": non-resource URL wildcards '*' must be the final character of the rule]"#,
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n",
            r#"rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs"#,
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  resources: [{group: rbac.authorization.k8s.io/v1, resourceNames: [x]}]\n",
            r#"[rules[0].resources.group: Invalid value: "rbac.authorization.k8s.io/v1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), rules[0].resources.resourceNames: Invalid value: []string{"x"}: using resourceNames requires at least one resource]"#,
        ),
    ];
    for (yaml, want) in cases {
        let err = Policy::from_bytes(yaml.as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), *want, "{yaml}");
    }
    assert!(matches!(
        Policy::from_bytes(b""),
        Err(PolicyError::GroupVersion(_))
    ));
    assert!(matches!(
        Policy::from_bytes(b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: {level: None}\n"),
        Err(PolicyError::Decode(_))
    ));
}

#[test]
fn a_files_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, "apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
    assert_eq!(
        Policy::load(&path).unwrap_err().to_string(),
        format!(
            "loaded illegal policy with 0 rules: from file {}",
            path.display()
        )
    );
    let missing = dir.path().join("missing.yaml");
    assert!(
        Policy::load(&missing)
            .unwrap_err()
            .to_string()
            .starts_with(&format!("failed to read file path {missing:?}: "))
    );
}
