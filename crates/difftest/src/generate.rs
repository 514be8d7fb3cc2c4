//! The seeded sequence generator.
//!
//! A seed gives the same sequence every time (rand's `StdRng`), so a difference found by
//! `compare` is reproduced by its seed alone. The generator keeps a rough model of what exists
//! (names created, finalizers, whether the namespace is being deleted) only to make requests that
//! hit interesting cases (an update of something that exists, a stale resourceVersion after an
//! update); it never predicts answers: both servers are asked, and their answers compared.

pub mod admission;

use crate::sequence::{Request, Sequence, Step, WatchEnd};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::IndexedRandom};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The kinds sequences use: all work on a bare API server (no controller acts on them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Secret.
    Secret,
    /// core/v1 Service, always headless (`clusterIP: None`) so no IP is allocated.
    Service,
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// core/v1 Pod.
    Pod,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// coordination.k8s.io/v1 Lease.
    Lease,
}

const KINDS: [Kind; 8] = [
    Kind::ConfigMap,
    Kind::Secret,
    Kind::Service,
    Kind::Deployment,
    Kind::ReplicaSet,
    Kind::Pod,
    Kind::ServiceAccount,
    Kind::Lease,
];

impl Kind {
    /// The resource's plural.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
            Kind::Service => "services",
            Kind::Deployment => "deployments",
            Kind::ReplicaSet => "replicasets",
            Kind::Pod => "pods",
            Kind::ServiceAccount => "serviceaccounts",
            Kind::Lease => "leases",
        }
    }

    fn group_path(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::ReplicaSet => "/apis/apps/v1",
            Kind::Lease => "/apis/coordination.k8s.io/v1",
            _ => "/api/v1",
        }
    }

    /// The `apiVersion` of its objects.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::ReplicaSet => "apps/v1",
            Kind::Lease => "coordination.k8s.io/v1",
            _ => "v1",
        }
    }

    /// The `kind` of its objects.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::Service => "Service",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Pod => "Pod",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Lease => "Lease",
        }
    }

    fn collection(self) -> String {
        format!(
            "{}/namespaces/{{{{ns}}}}/{}",
            self.group_path(),
            self.plural()
        )
    }

    fn item(self, name: &str) -> String {
        format!("{}/{name}", self.collection())
    }

    fn key(self, name: &str) -> String {
        format!("{}/{name}", self.plural())
    }
}

/// Names objects are created under: few, so creates collide and gets find things.
const NAMES: [&str; 4] = ["alpha", "beta", "gamma", "delta"];
/// The custom finalizer objects may carry; nothing on either side removes it but the sequence.
pub const FINALIZER: &str = "difftest.example.com/hold";

#[derive(Clone, Debug, Default)]
struct Obj {
    finalizer: bool,
    deleting: bool,
    updated: bool,
}

struct Gen {
    rng: StdRng,
    steps: Vec<Step>,
    kinds: Vec<Kind>,
    objs: BTreeMap<(Kind, String), Obj>,
    ns_deleted: bool,
    generated: Vec<Kind>,
    paged: Option<(usize, Kind, String)>,
}

/// The sequence for `seed`: 5 to 25 requests, the first creating namespace `dt-<seed>`, the last
/// deleting it. Seeds from [`admission::FIRST_SEED`] on are [`admission`]'s family.
pub fn sequence(seed: u64) -> Sequence {
    if seed >= admission::FIRST_SEED {
        return admission::sequence(seed);
    }
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        steps: Vec::new(),
        kinds: Vec::new(),
        objs: BTreeMap::new(),
        ns_deleted: false,
        generated: Vec::new(),
        paged: None,
    };
    let len = g.rng.random_range(5..=25usize);
    let nkinds = g.rng.random_range(1..=3usize);
    while g.kinds.len() < nkinds {
        let k = *KINDS.choose(&mut g.rng).unwrap_or(&Kind::ConfigMap);
        if !g.kinds.contains(&k) {
            g.kinds.push(k);
        }
    }
    g.push(
        "create/namespaces/valid",
        Request::new("POST", "/api/v1/namespaces").json(&json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{{ns}}"}
        })),
    );
    // Upstream's ServiceAccount admission refuses pods while the namespace has no `default`
    // ServiceAccount (no controller creates it here); most sequences create it so that pods are
    // exercised, some leave it out to compare that refusal.
    if g.kinds.contains(&Kind::Pod) && g.rng.random_bool(0.9) {
        g.push(
            "create/serviceaccounts/default",
            Request::new("POST", Kind::ServiceAccount.collection())
                .json(&json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}))
                .tracking("serviceaccounts/default"),
        );
    }
    while g.steps.len() + 1 < len {
        g.step();
    }
    // A flow of several requests (finalizers) may overshoot; the length stays within bounds.
    g.steps.truncate(len - 1);
    g.push(
        "delete/namespaces/end",
        Request::new("DELETE", "/api/v1/namespaces/{{ns}}"),
    );
    Sequence {
        seed,
        namespace: format!("dt-{seed}"),
        steps: g.steps,
    }
}

impl Gen {
    fn push(&mut self, label: &str, request: Request) -> usize {
        self.steps.push(Step {
            label: label.to_string(),
            request,
        });
        self.steps.len() - 1
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        // Callers pass non-empty slices; the fallback keeps the generator total anyway.
        match items.choose(&mut self.rng) {
            Some(x) => *x,
            None => items[0],
        }
    }

    fn kind(&mut self) -> Kind {
        let kinds = self.kinds.clone();
        self.pick(&kinds)
    }

    /// A name: usually one that exists (when one does), else any from the pool.
    fn name(&mut self, kind: Kind) -> String {
        let existing: Vec<String> = self
            .objs
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n.clone())
            .collect();
        if !existing.is_empty() && self.rng.random_bool(0.8) {
            let i = self.rng.random_range(0..existing.len());
            existing[i].clone()
        } else {
            self.pick(&NAMES).to_string()
        }
    }

    fn labels(&mut self) -> Value {
        let mut m = serde_json::Map::new();
        if self.rng.random_bool(0.7) {
            m.insert("app".into(), json!(self.pick(&["web", "db"])));
        }
        if self.rng.random_bool(0.5) {
            m.insert("tier".into(), json!(self.pick(&["fe", "be"])));
        }
        Value::Object(m)
    }

    fn dry_run(&mut self, r: Request, label: &mut String) -> Request {
        if self.rng.random_bool(0.08) {
            label.push_str("+dryrun");
            let mut r = r.q("dryRun", "All");
            // Upstream reads a DELETE's options from its body when it has one and then ignores
            // the query (a dry run would really delete); clients send both, as here.
            if r.method == "DELETE"
                && let Some(body) = r.body.as_deref()
                && let Ok(mut opts) = serde_json::from_str::<Value>(body)
            {
                opts["dryRun"] = json!(["All"]);
                r.body = Some(opts.to_string());
            }
            r
        } else {
            r
        }
    }

    fn step(&mut self) {
        let roll = self.rng.random_range(0..100u32);
        match roll {
            0..14 => self.create_valid(),
            14..16 => self.create_generated(),
            16..26 => self.create_invalid(),
            26..33 => self.get(),
            33..40 => self.list(),
            40..43 => self.list_page(),
            43..49 => self.watch(),
            49..57 => self.update(),
            57..62 => self.merge_patch(),
            62..67 => self.json_patch(),
            67..71 => self.strategic_patch(),
            71..78 => self.apply(),
            78..84 => self.subresource(),
            84..91 => self.delete(),
            91..92 => self.delete_collection(),
            92..96 => self.finalizer_flow(),
            96..98 => self.namespace_delete(),
            _ => self.get_namespace(),
        }
    }

    // ---- bodies ----

    fn body(&mut self, kind: Kind, name: &str, labels: Value) -> Value {
        // An empty label map is sent now and then, not always: servers differ on keeping it, and
        // that one difference would otherwise show up in most answers.
        let meta = if labels.as_object().is_some_and(|m| m.is_empty()) && !self.rng.random_bool(0.1)
        {
            json!({"name": name})
        } else {
            json!({"name": name, "labels": labels})
        };
        let mut obj =
            json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": meta});
        let image = self.pick(&["nginx:1.25", "nginx:1.26", "busybox:1.36"]);
        match kind {
            Kind::ConfigMap => obj["data"] = json!({"k": self.pick(&["v1", "v2", "v3"])}),
            Kind::Secret => {
                obj["type"] = json!("Opaque");
                obj["data"] = json!({"k": self.pick(&["djE=", "djI="])});
                if self.rng.random_bool(0.3) {
                    obj["stringData"] = json!({"s": "plain"});
                }
            }
            Kind::Service => {
                obj["spec"] = json!({
                    "clusterIP": "None",
                    "selector": {"app": name},
                    "ports": [{"name": "http", "port": self.pick(&[80, 8080]), "targetPort": 8080}]
                })
            }
            Kind::Deployment | Kind::ReplicaSet => {
                obj["spec"] = json!({
                    "replicas": self.rng.random_range(0..4),
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {"containers": [{"name": "c", "image": image}]}
                    }
                })
            }
            Kind::Pod => {
                obj["spec"] = json!({"containers": [{"name": "c", "image": image}]});
                if self.rng.random_bool(0.2) {
                    obj["spec"]["restartPolicy"] = json!("Never");
                }
            }
            Kind::ServiceAccount => {
                if self.rng.random_bool(0.3) {
                    obj["automountServiceAccountToken"] = json!(false);
                }
            }
            Kind::Lease => {
                obj["spec"] = json!({
                    "holderIdentity": self.pick(&["h1", "h2"]),
                    "leaseDurationSeconds": self.pick(&[15, 30]),
                })
            }
        }
        obj
    }

    // ---- creates ----

    fn create_valid(&mut self) {
        let kind = self.kind();
        let name = self.pick(&NAMES).to_string();
        let labels = self.labels();
        let body = self.body(kind, &name, labels);
        let mut label = format!("create/{}/valid", kind.plural());
        let r = Request::new("POST", kind.collection())
            .json(&body)
            .tracking(kind.key(&name));
        let r = self.dry_run(r, &mut label);
        if !label.ends_with("+dryrun") {
            self.objs.entry((kind, name)).or_default();
        }
        self.push(&label, r);
    }

    fn create_generated(&mut self) {
        let kind = self.kind();
        let labels = self.labels();
        let mut body = self.body(kind, "x", labels);
        let prefix = format!("{}-", kind.plural().trim_end_matches('s'));
        body["metadata"] =
            json!({"generateName": prefix, "labels": body["metadata"]["labels"].clone()});
        if matches!(kind, Kind::Service | Kind::Deployment | Kind::ReplicaSet) {
            let sel = json!({"app": "gen"});
            match kind {
                Kind::Service => body["spec"]["selector"] = sel,
                _ => {
                    body["spec"]["selector"]["matchLabels"] = sel.clone();
                    body["spec"]["template"]["metadata"]["labels"] = sel;
                }
            }
        }
        if !self.generated.contains(&kind) {
            self.generated.push(kind);
        }
        self.push(
            &format!("create/{}/generate-name", kind.plural()),
            Request::new("POST", kind.collection()).json(&body),
        );
    }

    fn create_invalid(&mut self) {
        let kind = self.kind();
        let name = self.pick(&NAMES).to_string();
        let labels = self.labels();
        let mut body = self.body(kind, &name, labels);
        let variant = self.rng.random_range(0..12u32);
        let mut r = Request::new("POST", kind.collection());
        let label;
        match variant {
            0 => {
                let bad =
                    self.pick(&["Bad_Name", "-lead", "UPPER", "a.b", "trailing-", "x..y", ""]);
                body["metadata"]["name"] = json!(bad);
                label = "bad-name";
            }
            1 => {
                body["metadata"]["name"] = json!("n".repeat(self.pick(&[64usize, 254])));
                label = "long-name";
            }
            2 => {
                body["metadata"].as_object_mut().map(|m| m.remove("name"));
                label = "no-name";
            }
            3 | 4 => {
                label = self.missing_required(kind, &mut body);
            }
            5 | 6 => {
                let v = self.pick(&["Strict", "Warn", "Ignore", ""]);
                let at = self.rng.random_range(0..3u32);
                match at {
                    0 => body["bogusTop"] = json!(1),
                    1 => body["metadata"]["bogusMeta"] = json!("x"),
                    _ => {
                        if body.get("spec").is_some() {
                            body["spec"]["bogusSpec"] = json!(true)
                        } else {
                            body["bogusTop"] = json!({"nested": 1})
                        }
                    }
                }
                if !v.is_empty() {
                    r = r.q("fieldValidation", v);
                }
                label = match v {
                    "Strict" => "unknown-field-strict",
                    "Warn" => "unknown-field-warn",
                    "Ignore" => "unknown-field-ignore",
                    _ => "unknown-field-default",
                };
                self.objs.entry((kind, name.clone())).or_default();
            }
            7 => {
                let v = self.pick(&["Strict", "Warn", "Ignore"]);
                // The same key twice: serde_json cannot build that, so write the text.
                let text = body.to_string().replacen(
                    "{\"apiVersion\":",
                    &format!(
                        "{{\"apiVersion\":\"{}\",\"apiVersion\":",
                        kind.api_version()
                    ),
                    1,
                );
                r = r.q("fieldValidation", v).body_as("application/json", text);
                self.objs.entry((kind, name.clone())).or_default();
                self.push(
                    &format!(
                        "create/{}/duplicate-field-{}",
                        kind.plural(),
                        v.to_lowercase()
                    ),
                    r.tracking(kind.key(&name)),
                );
                return;
            }
            8 => {
                body["metadata"]["namespace"] = json!("other-ns");
                label = "namespace-mismatch";
            }
            9 => {
                body["kind"] = json!(if kind == Kind::ConfigMap {
                    "Secret"
                } else {
                    "ConfigMap"
                });
                label = "kind-mismatch";
            }
            10 => {
                let text = body.to_string();
                let cut = text.len() / 2;
                r = r.body_as("application/json", text[..cut].to_string());
                self.push(&format!("create/{}/malformed-json", kind.plural()), r);
                return;
            }
            _ => {
                body["metadata"]["labels"] = json!({"bad key!": "v", "ok": "bad value!"});
                label = "bad-labels";
            }
        }
        if r.body.is_none() {
            r = r.json(&body);
        }
        self.push(
            &format!("create/{}/{label}", kind.plural()),
            r.tracking(kind.key(&name)),
        );
    }

    fn missing_required(&mut self, kind: Kind, body: &mut Value) -> &'static str {
        match kind {
            Kind::Deployment | Kind::ReplicaSet => match self.rng.random_range(0..4u32) {
                0 => {
                    body["spec"].as_object_mut().map(|m| m.remove("selector"));
                    "no-selector"
                }
                1 => {
                    body["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
                    "selector-mismatch"
                }
                2 => {
                    body["spec"]["replicas"] = json!(-1);
                    "negative-replicas"
                }
                _ => {
                    body["spec"]["template"]["spec"]["containers"][0]
                        .as_object_mut()
                        .map(|m| m.remove("image"));
                    "no-image"
                }
            },
            Kind::Pod => match self.rng.random_range(0..3u32) {
                0 => {
                    body["spec"]["containers"] = json!([]);
                    "no-containers"
                }
                1 => {
                    body["spec"]["containers"][0]
                        .as_object_mut()
                        .map(|m| m.remove("image"));
                    "no-image"
                }
                _ => {
                    body["spec"]["restartPolicy"] = json!("Sometimes");
                    "bad-restart-policy"
                }
            },
            Kind::Service => match self.rng.random_range(0..3u32) {
                0 => {
                    body["spec"]["ports"][0]["port"] = json!(0);
                    "port-zero"
                }
                1 => {
                    body["spec"]["type"] = json!("ExternalName");
                    "external-name-missing"
                }
                _ => {
                    body["spec"]["ports"][0]["protocol"] = json!("SCTP-ish");
                    "bad-protocol"
                }
            },
            Kind::Secret => match self.rng.random_range(0..2u32) {
                0 => {
                    body["type"] = json!("kubernetes.io/tls");
                    "tls-missing-keys"
                }
                _ => {
                    body["data"] = json!({"k": "not base64!"});
                    "bad-base64"
                }
            },
            Kind::Lease => {
                body["spec"]["leaseDurationSeconds"] = json!(self.pick(&[0, -5]));
                "bad-duration"
            }
            Kind::ConfigMap => {
                body["data"] = json!({"bad key/": "v"});
                "bad-data-key"
            }
            Kind::ServiceAccount => {
                body["secrets"] = json!([{"name": ""}]);
                "empty-secret-ref"
            }
        }
    }

    // ---- reads ----

    fn get(&mut self) {
        let kind = self.kind();
        let (name, variant) = if self.rng.random_bool(0.8) {
            (self.name(kind), "get")
        } else {
            ("missing".to_string(), "missing")
        };
        self.push(
            &format!("get/{}/{variant}", kind.plural()),
            Request::new("GET", kind.item(&name)).tracking(kind.key(&name)),
        );
    }

    fn get_namespace(&mut self) {
        self.push(
            "get/namespaces/own",
            Request::new("GET", "/api/v1/namespaces/{{ns}}"),
        );
    }

    fn selector(&mut self) -> (&'static str, String) {
        match self.rng.random_range(0..9u32) {
            0 => ("label-eq", "app=web".into()),
            1 => ("label-neq", "app!=web".into()),
            2 => ("label-in", "tier in (fe,be)".into()),
            3 => ("label-notin", "app notin (db)".into()),
            4 => ("label-exists", "tier".into()),
            5 => ("label-not-exists", "!tier".into()),
            6 => ("label-and", "app=web,tier=fe".into()),
            7 => ("label-invalid", "app===x".into()),
            _ => ("label-bad-value", "app=bad value".into()),
        }
    }

    fn list(&mut self) {
        let kind = self.kind();
        let mut r = Request::new("GET", kind.collection()).tracking(kind.plural());
        let variant = match self.rng.random_range(0..6u32) {
            0 => "all",
            1 | 2 => {
                let (v, s) = self.selector();
                r = r.q("labelSelector", s);
                v
            }
            3 => {
                let name = self.name(kind);
                r = r.q("fieldSelector", format!("metadata.name={name}"));
                "field-name"
            }
            4 => {
                let name = self.name(kind);
                r = r.q("fieldSelector", format!("metadata.name!={name}"));
                "field-name-neq"
            }
            _ => {
                let f = match kind {
                    Kind::Pod => {
                        self.pick(&["spec.nodeName=", "status.phase=Pending", "spec.bogus=x"])
                    }
                    Kind::Secret => self.pick(&["type=Opaque", "spec.bogus=x"]),
                    Kind::ReplicaSet => self.pick(&["status.replicas=0", "spec.bogus=x"]),
                    _ => self.pick(&["metadata.namespace={{ns}}", "spec.bogus=x"]),
                };
                r = r.q("fieldSelector", f);
                if f.contains("bogus") {
                    "field-unsupported"
                } else {
                    "field-kind"
                }
            }
        };
        if self.rng.random_bool(0.2) {
            r = r.q("resourceVersion", "0");
        }
        self.push(&format!("list/{}/{variant}", kind.plural()), r);
    }

    fn list_page(&mut self) {
        if let Some((prev, kind, limit)) = self.paged.take()
            && self.rng.random_bool(0.8)
        {
            self.push(
                &format!("list/{}/continue", kind.plural()),
                Request::new("GET", kind.collection())
                    .q("limit", limit.clone())
                    .q("continue", format!("{{{{continue:{prev}}}}}"))
                    .tracking(kind.plural()),
            );
            let at = self.steps.len() - 1;
            self.paged = Some((at, kind, limit));
            return;
        }
        let candidates: Vec<Kind> = self
            .kinds
            .iter()
            .copied()
            .filter(|k| !self.generated.contains(k))
            .collect();
        // Generated names are random on each side, so pages over them would differ by chance.
        let Some(&kind) = candidates.choose(&mut self.rng) else {
            return self.list();
        };
        let limit = self.pick(&["1", "2", "3"]).to_string();
        let at = self.push(
            &format!("list/{}/limit", kind.plural()),
            Request::new("GET", kind.collection())
                .q("limit", limit.clone())
                .tracking(kind.plural()),
        );
        self.paged = Some((at, kind, limit));
    }

    fn watch(&mut self) {
        let kind = self.kind();
        let mut r = Request::new("GET", kind.collection())
            .q("watch", "true")
            .q("timeoutSeconds", "2");
        let earlier: Vec<usize> = (1..self.steps.len()).collect();
        let (variant, sort_initial) = match self.rng.random_range(0..5u32) {
            0 => ("unset", true),
            1 => {
                r = r.q("resourceVersion", "0");
                ("rv-zero", true)
            }
            2 | 3 if !earlier.is_empty() => {
                let i = earlier[self.rng.random_range(0..earlier.len())];
                r = r.q("resourceVersion", format!("{{{{resp-rv:{i}}}}}"));
                ("rv-earlier", false)
            }
            2 | 3 => ("unset", true),
            _ => {
                r = r
                    .q("sendInitialEvents", "true")
                    .q("allowWatchBookmarks", "true")
                    .q("resourceVersionMatch", "NotOlderThan");
                ("send-initial-events", true)
            }
        };
        let mut labels = json!({});
        if self.rng.random_bool(0.3) {
            r = r.q("labelSelector", "app=web");
            labels = json!({"app": "web"});
        }
        let name = format!("sentinel-{}", self.steps.len());
        let body = self.body(kind, &name, labels);
        let sentinel = Request::new("POST", kind.collection())
            .json(&body)
            .tracking(kind.key(&name));
        r.watch = Some(WatchEnd {
            sentinel: Box::new(sentinel),
            sentinel_name: name.clone(),
            sort_initial,
        });
        self.objs.entry((kind, name)).or_default();
        self.push(&format!("watch/{}/{variant}", kind.plural()), r);
    }

    // ---- writes ----

    fn update(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let labels = self.labels();
        let mut body = self.body(kind, &name, labels);
        let key = kind.key(&name);
        let variant = match self.rng.random_range(0..7u32) {
            0..=2 => {
                body["metadata"]["resourceVersion"] = json!(format!("{{{{rv:{key}}}}}"));
                "current-rv"
            }
            3 => {
                body["metadata"]["resourceVersion"] = json!(format!("{{{{oldrv:{key}}}}}"));
                "stale-rv"
            }
            4 => "no-rv",
            5 => {
                body["metadata"]["name"] = json!("other-name");
                "name-mismatch"
            }
            _ => {
                body["metadata"]["resourceVersion"] = json!(format!("{{{{rv:{key}}}}}"));
                match kind {
                    Kind::Deployment | Kind::ReplicaSet => {
                        body["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
                        body["spec"]["template"]["metadata"]["labels"]["extra"] = json!("x");
                        "change-selector"
                    }
                    Kind::Pod => {
                        body["spec"]["containers"][0]["name"] = json!("renamed");
                        "change-immutable"
                    }
                    Kind::Secret => {
                        body["immutable"] = json!(true);
                        "make-immutable"
                    }
                    Kind::ConfigMap => {
                        body["immutable"] = json!(true);
                        "make-immutable"
                    }
                    _ => {
                        body["metadata"]["finalizers"] = json!([FINALIZER]);
                        if let Some(o) = self.objs.get_mut(&(kind, name.clone())) {
                            o.finalizer = true;
                        }
                        "add-finalizer"
                    }
                }
            }
        };
        if let Some(o) = self.objs.get_mut(&(kind, name.clone()))
            && o.finalizer
            && body["metadata"].get("finalizers").is_none()
        {
            // Keeping the finalizer in the body keeps the object held, as a client would.
            body["metadata"]["finalizers"] = json!([FINALIZER]);
            o.updated = true;
        }
        let mut label = format!("update/{}/{variant}", kind.plural());
        let r = Request::new("PUT", kind.item(&name))
            .json(&body)
            .tracking(key);
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    fn merge_patch(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let key = kind.key(&name);
        let (variant, patch) = match self.rng.random_range(0..6u32) {
            0 => (
                "add-label",
                json!({"metadata": {"labels": {"patched": "yes"}}}),
            ),
            1 => (
                "remove-label",
                json!({"metadata": {"labels": {"app": null}}}),
            ),
            2 => (
                "stale-rv",
                json!({"metadata": {"resourceVersion": format!("{{{{oldrv:{key}}}}}"), "annotations": {"a": "1"}}}),
            ),
            3 => ("spec", self.spec_change(kind)),
            4 => ("change-name", json!({"metadata": {"name": "renamed"}})),
            _ => ("bogus-field", json!({"bogusTop": {"x": 1}})),
        };
        let mut r = Request::new("PATCH", kind.item(&name))
            .body_as("application/merge-patch+json", patch.to_string())
            .tracking(key);
        if variant == "bogus-field" {
            r = r.q("fieldValidation", self.pick(&["Strict", "Warn"]));
        }
        let mut label = format!("patch-merge/{}/{variant}", kind.plural());
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    fn spec_change(&mut self, kind: Kind) -> Value {
        match kind {
            Kind::ConfigMap => json!({"data": {"k2": "added", "k": null}}),
            Kind::Secret => json!({"stringData": {"s2": "plain2"}}),
            Kind::Service => json!({"spec": {"ports": [{"name": "https", "port": 443}]}}),
            Kind::Deployment | Kind::ReplicaSet => {
                json!({"spec": {"replicas": self.rng.random_range(0..5), "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
            }
            Kind::Pod => json!({"spec": {"activeDeadlineSeconds": 60}}),
            Kind::ServiceAccount => json!({"automountServiceAccountToken": true}),
            Kind::Lease => json!({"spec": {"holderIdentity": "h3", "leaseTransitions": 1}}),
        }
    }

    fn json_patch(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let (variant, ops) = match self.rng.random_range(0..8u32) {
            0 => (
                "add-label",
                json!([{"op": "add", "path": "/metadata/labels", "value": {"jp": "1"}}]),
            ),
            1 => (
                "add-missing-parent",
                json!([{"op": "add", "path": "/metadata/annotations/x~1y", "value": "v"}]),
            ),
            2 => (
                "test-fail",
                json!([{"op": "test", "path": "/metadata/name", "value": "nope"}, {"op": "add", "path": "/metadata/labels/t", "value": "1"}]),
            ),
            3 => (
                "test-pass",
                json!([{"op": "test", "path": "/metadata/name", "value": name}, {"op": "replace", "path": "/metadata/labels", "value": {"t": "2"}}]),
            ),
            4 => (
                "remove-missing",
                json!([{"op": "remove", "path": "/metadata/labels/nothere"}]),
            ),
            5 => (
                "replace-name",
                json!([{"op": "replace", "path": "/metadata/name", "value": "renamed"}]),
            ),
            6 => ("bad-op", json!([{"op": "frobnicate", "path": "/x"}])),
            _ => (
                "not-an-array",
                json!({"op": "add", "path": "/metadata/labels", "value": {}}),
            ),
        };
        let mut label = format!("patch-json/{}/{variant}", kind.plural());
        let r = Request::new("PATCH", kind.item(&name))
            .body_as("application/json-patch+json", ops.to_string())
            .tracking(kind.key(&name));
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    fn strategic_patch(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let (variant, patch) = match (kind, self.rng.random_range(0..4u32)) {
            (Kind::Deployment | Kind::ReplicaSet, 0) => (
                "container-image",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}),
            ),
            (Kind::Deployment | Kind::ReplicaSet, 1) => (
                "add-container",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:1.36"}]}}}}),
            ),
            (Kind::Deployment | Kind::ReplicaSet, 2) => (
                "delete-container",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "$patch": "delete"}]}}}}),
            ),
            (Kind::Pod, 0) => (
                "container-image",
                json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}),
            ),
            (Kind::Service, 0) => (
                "add-port",
                json!({"spec": {"ports": [{"name": "https", "port": 443}]}}),
            ),
            (_, 3) => (
                "bad-directive",
                json!({"metadata": {"$patch": "frobnicate"}}),
            ),
            _ => (
                "labels",
                json!({"metadata": {"labels": {"smp": "1", "app": null}}}),
            ),
        };
        let mut label = format!("patch-strategic/{}/{variant}", kind.plural());
        let r = Request::new("PATCH", kind.item(&name))
            .body_as("application/strategic-merge-patch+json", patch.to_string())
            .tracking(kind.key(&name));
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    fn apply(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let labels = self.labels();
        let full = self.body(kind, &name, labels);
        // An applied configuration names only the fields its manager owns.
        let mut body = json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": {"name": name}});
        match kind {
            Kind::ConfigMap => body["data"] = json!({"k": self.pick(&["a1", "a2"])}),
            Kind::Lease => body["spec"] = json!({"holderIdentity": self.pick(&["m1", "m2"])}),
            Kind::ServiceAccount => {
                body["metadata"]["labels"] = json!({"owner": self.pick(&["m1", "m2"])})
            }
            _ => body = full,
        }
        let manager = self.pick(&["mgr-a", "mgr-b", ""]);
        let mut r = Request::new("PATCH", kind.item(&name))
            .body_as("application/apply-patch+yaml", body.to_string())
            .tracking(kind.key(&name));
        if !manager.is_empty() {
            r = r.q("fieldManager", manager);
        }
        let variant = if self.rng.random_bool(0.3) {
            r = r.q("force", "true");
            "force"
        } else if self.rng.random_bool(0.1) {
            r = r.q("force", "maybe");
            "bad-force"
        } else {
            "plain"
        };
        let variant = if manager.is_empty() {
            format!("{variant}-no-manager")
        } else {
            variant.to_string()
        };
        self.objs.entry((kind, name)).or_default();
        let mut label = format!("apply/{}/{variant}", kind.plural());
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    fn subresource(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let key = kind.key(&name);
        let item = kind.item(&name);
        let (label, r) = match kind {
            Kind::Deployment | Kind::ReplicaSet => match self.rng.random_range(0..6u32) {
                0 => ("scale-get", Request::new("GET", format!("{item}/scale"))),
                1 => (
                    "scale-put",
                    Request::new("PUT", format!("{item}/scale")).json(&json!({
                        "apiVersion": "autoscaling/v1", "kind": "Scale",
                        "metadata": {"name": name, "namespace": "{{ns}}"},
                        "spec": {"replicas": self.rng.random_range(0..6)}
                    })),
                ),
                2 => (
                    "scale-patch",
                    Request::new("PATCH", format!("{item}/scale")).body_as(
                        "application/merge-patch+json",
                        json!({"spec": {"replicas": self.pick(&[2, -1])}}).to_string(),
                    ),
                ),
                3 => (
                    "status-patch",
                    Request::new("PATCH", format!("{item}/status")).body_as(
                        "application/merge-patch+json",
                        json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1}, "spec": {"replicas": 9}})
                            .to_string(),
                    ),
                ),
                4 => (
                    "status-invalid",
                    Request::new("PATCH", format!("{item}/status")).body_as(
                        "application/merge-patch+json",
                        json!({"status": {"replicas": -3}}).to_string(),
                    ),
                ),
                _ => ("status-get", Request::new("GET", format!("{item}/status"))),
            },
            Kind::Pod => match self.rng.random_range(0..3u32) {
                0 => (
                    "status-patch",
                    Request::new("PATCH", format!("{item}/status")).body_as(
                        "application/merge-patch+json",
                        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}).to_string(),
                    ),
                ),
                1 => (
                    "status-invalid",
                    Request::new("PATCH", format!("{item}/status")).body_as(
                        "application/merge-patch+json",
                        json!({"status": {"phase": "Bogus"}}).to_string(),
                    ),
                ),
                _ => ("status-get", Request::new("GET", format!("{item}/status"))),
            },
            Kind::Service => (
                "status-patch",
                Request::new("PATCH", format!("{item}/status")).body_as(
                    "application/merge-patch+json",
                    json!({"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}}).to_string(),
                ),
            ),
            _ => (
                "no-such-subresource",
                Request::new("GET", format!("{item}/status")),
            ),
        };
        self.push(
            &format!("subresource/{}/{label}", kind.plural()),
            r.tracking(key),
        );
    }

    fn delete(&mut self) {
        let kind = self.kind();
        let name = self.name(kind);
        let key = kind.key(&name);
        let mut r = Request::new("DELETE", kind.item(&name)).tracking(key.clone());
        let variant = match self.rng.random_range(0..10u32) {
            0 | 1 => "plain",
            2 => {
                r = r.json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": format!("{{{{uid:{key}}}}}")}}));
                "precondition-uid"
            }
            3 => {
                r = r.json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000001"}}));
                "precondition-wrong-uid"
            }
            4 => {
                r = r.json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": format!("{{{{rv:{key}}}}}")}}));
                "precondition-rv"
            }
            5 => {
                r = r.json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": format!("{{{{oldrv:{key}}}}}")}}));
                "precondition-stale-rv"
            }
            6 => {
                let p = self.pick(&["Foreground", "Background", "Orphan", "Bogus"]);
                r = r.q("propagationPolicy", p);
                match p {
                    "Foreground" => "propagation-foreground",
                    "Background" => "propagation-background",
                    "Orphan" => "propagation-orphan",
                    _ => "propagation-invalid",
                }
            }
            7 => {
                r = r.json(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan", "orphanDependents": true}));
                "orphan-both"
            }
            8 => {
                r = r.q("gracePeriodSeconds", self.pick(&["0", "30", "-1"]));
                "grace-period"
            }
            _ => {
                r = Request::new("DELETE", kind.item("missing"));
                "missing"
            }
        };
        let mut label = format!("delete/{}/{variant}", kind.plural());
        let r = self.dry_run(r, &mut label);
        if !label.ends_with("+dryrun") {
            if let Some(o) = self.objs.get(&(kind, name.clone()))
                && (o.finalizer
                    || variant.starts_with("propagation-f")
                    || variant.contains("orphan"))
            {
                if let Some(o) = self.objs.get_mut(&(kind, name.clone())) {
                    o.deleting = true;
                }
            } else if variant != "missing" {
                self.objs.remove(&(kind, name));
            }
        }
        self.push(&label, r);
    }

    fn delete_collection(&mut self) {
        let kind = self.kind();
        let (v, s) = self.selector();
        let mut label = format!("deletecollection/{}/{v}", kind.plural());
        let r = Request::new("DELETE", kind.collection()).q("labelSelector", s);
        let r = self.dry_run(r, &mut label);
        self.push(&label, r);
    }

    /// An object held by a finalizer: create, delete (it stays, with a deletionTimestamp), try to
    /// add another finalizer, then remove the finalizer (it goes).
    fn finalizer_flow(&mut self) {
        let kind = self.kind();
        let name = self.pick(&NAMES).to_string();
        let key = kind.key(&name);
        let labels = self.labels();
        let mut body = self.body(kind, &name, labels);
        body["metadata"]["finalizers"] = json!([FINALIZER]);
        self.push(
            &format!("create/{}/with-finalizer", kind.plural()),
            Request::new("POST", kind.collection())
                .json(&body)
                .tracking(key.clone()),
        );
        let o = self.objs.entry((kind, name.clone())).or_default();
        o.finalizer = true;
        if self.rng.random_bool(0.7) {
            self.push(
                &format!("delete/{}/held", kind.plural()),
                Request::new("DELETE", kind.item(&name)).tracking(key.clone()),
            );
            if self.rng.random_bool(0.4) {
                self.push(
                    &format!("patch-merge/{}/add-finalizer-while-deleting", kind.plural()),
                    Request::new("PATCH", kind.item(&name))
                        .body_as(
                            "application/merge-patch+json",
                            json!({"metadata": {"finalizers": [FINALIZER, "difftest.example.com/late"]}}).to_string(),
                        )
                        .tracking(key.clone()),
                );
            }
        }
        if self.rng.random_bool(0.7) {
            let patch = if self.rng.random_bool(0.5) {
                (
                    "application/merge-patch+json",
                    json!({"metadata": {"finalizers": null}}),
                )
            } else {
                (
                    "application/json-patch+json",
                    json!([{"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER}, {"op": "remove", "path": "/metadata/finalizers"}]),
                )
            };
            self.push(
                &format!("patch/{}/remove-finalizer", kind.plural()),
                Request::new("PATCH", kind.item(&name))
                    .body_as(patch.0, patch.1.to_string())
                    .tracking(key),
            );
            if let Some(o) = self.objs.get_mut(&(kind, name)) {
                o.finalizer = false;
            }
        }
    }

    fn namespace_delete(&mut self) {
        if self.ns_deleted {
            return self.get_namespace();
        }
        self.ns_deleted = true;
        let r = Request::new("DELETE", "/api/v1/namespaces/{{ns}}");
        let mut label = "delete/namespaces/mid-sequence".to_string();
        let r = self.dry_run(r, &mut label);
        if label.ends_with("+dryrun") {
            self.ns_deleted = false;
        }
        self.push(&label, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_sequence() {
        for seed in 0..50 {
            assert_eq!(sequence(seed), sequence(seed));
        }
        assert_ne!(sequence(1), sequence(2));
    }

    #[test]
    fn sequences_start_with_their_namespace_and_end_deleting_it() {
        for seed in 0..200 {
            let s = sequence(seed);
            assert!(
                (5..=25).contains(&s.steps.len()),
                "{seed}: {}",
                s.steps.len()
            );
            assert_eq!(s.steps[0].label, "create/namespaces/valid");
            assert_eq!(
                s.steps.last().map(|s| s.label.as_str()),
                Some("delete/namespaces/end")
            );
            assert_eq!(s.namespace, format!("dt-{seed}"));
        }
    }

    #[test]
    fn every_operation_appears_in_a_few_hundred_seeds() {
        let labels: Vec<String> = (0..300)
            .flat_map(|seed| sequence(seed).steps.into_iter().map(|s| s.label))
            .collect();
        for op in [
            "create/",
            "get/",
            "list/",
            "watch/",
            "update/",
            "patch-merge/",
            "patch-json/",
            "patch-strategic/",
            "apply/",
            "subresource/",
            "delete/",
            "deletecollection/",
            "+dryrun",
            "/with-finalizer",
            "/continue",
            "mid-sequence",
        ] {
            assert!(
                labels.iter().any(|l| l.contains(op)),
                "{op} never generated"
            );
        }
    }
}
