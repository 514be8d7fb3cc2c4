//! Services: cluster IPs from the service range and node ports from 30000-32767 assigned on
//! create (and kept by updates that leave them out, as upstream's REST layer keeps them), the
//! `kubernetes` Service, and Endpoints.

use std::{
    collections::{HashMap, HashSet},
    net::Ipv4Addr,
    sync::Mutex,
    time::{Duration, Instant},
};

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use serde_json::{Value, json};

use crate::{
    registry::{Cluster, Kind, Rules, Strategy, Subresource},
    table::{
        AGE, Column, Desc, NAME, Printer, Row, age_cell, arr, col, format_labels, get, i,
        name_cell, plain, s,
    },
};

/// The service range, upstream's default `--service-cluster-ip-range`: 10.96.0.0/12.
pub const SERVICE_CIDR: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 96, 0, 0), 12);
/// The `kubernetes` Service's address: the range's first.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// Upstream's default `--service-node-port-range`.
pub const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;
/// How long a value handed out stays reserved for a create that has not reached the cache yet.
const RESERVATION: Duration = Duration::from_secs(60);

/// The services kind.
pub(super) fn service() -> Kind {
    Kind::of::<Service>()
        .short_names(&["svc"])
        .categories(&["all"])
        .subresources(&[Subresource::Status])
        .strategy(ServiceStrategy::default())
        .printer(Printer::Columns {
            columns: service_columns,
            row: service_row,
        })
}

/// The endpoints kind.
pub(super) fn endpoints() -> Kind {
    Kind::of::<Endpoints>()
        .short_names(&["ep"])
        .strategy(Rules::new().validate(api::validation::meta::validate_namespaced))
        .printer(Printer::Columns {
            columns: endpoints_columns,
            row: endpoints_row,
        })
}

/// Upstream's `pkg/registry/core/service/strategy.go` with its IP and port allocators.
#[derive(Default)]
struct ServiceStrategy {
    /// Values handed out recently, until the objects that hold them are in the cache.
    reserved: Mutex<Reserved>,
}

#[derive(Default)]
struct Reserved {
    ips: HashMap<Ipv4Addr, Instant>,
    ports: HashMap<i64, Instant>,
}

impl Reserved {
    fn expire(&mut self) {
        self.ips.retain(|_, t| t.elapsed() < RESERVATION);
        self.ports.retain(|_, t| t.elapsed() < RESERVATION);
    }
}

fn spec_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get("spec")
        .and_then(|s| s.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn has_node_ports(obj: &Value) -> bool {
    matches!(spec_str(obj, "type"), "NodePort" | "LoadBalancer")
}

fn ports_mut(obj: &mut Value) -> Vec<&mut serde_json::Map<String, Value>> {
    obj.get_mut("spec")
        .and_then(|s| s.get_mut("ports"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
        .collect()
}

/// Addresses and node ports the stored Services hold.
fn in_use(cluster: &dyn Cluster) -> (HashSet<Ipv4Addr>, HashSet<i64>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for svc in cluster.objects("", "services") {
        if let Ok(ip) = spec_str(&svc, "clusterIP").parse::<Ipv4Addr>() {
            ips.insert(ip);
        }
        for p in arr(&svc, &["spec", "ports"]) {
            if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
                ports.insert(n);
            }
        }
    }
    (ips, ports)
}

fn in_range(ip: Ipv4Addr) -> bool {
    let (base, prefix) = SERVICE_CIDR;
    let mask = u32::MAX << (32 - prefix);
    u32::from(ip) & mask == u32::from(base)
}

impl ServiceStrategy {
    /// Assigns a cluster IP and node ports where the object lacks them; checks the ones it asks
    /// for. `keep` are the values the object already held (an update), never reported as taken.
    fn assign(
        &self,
        obj: &mut Value,
        cluster: &dyn Cluster,
        keep: (&HashSet<Ipv4Addr>, &HashSet<i64>),
    ) -> Result<(), Vec<FieldError>> {
        if spec_str(obj, "type") == "ExternalName" {
            return Ok(());
        }
        let mut reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        reserved.expire();
        let (mut ips, mut ports) = in_use(cluster);
        ips.extend(reserved.ips.keys());
        ports.extend(reserved.ports.keys());
        let mut errs = Vec::new();
        match spec_str(obj, "clusterIP") {
            "None" => {}
            "" => match free_ip(&ips) {
                Some(ip) => {
                    reserved.ips.insert(ip, Instant::now());
                    obj["spec"]["clusterIP"] = json!(ip.to_string());
                }
                None => errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    Value::Null,
                    "failed to allocate IP: range is full",
                )),
            },
            asked => match asked.parse::<Ipv4Addr>() {
                Ok(ip) if !in_range(ip) => errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    json!([asked]),
                    format!(
                        "failed to allocate IP {asked}: the provided IP ({asked}) is not in the valid range. The range of valid IPs is {}/{}",
                        SERVICE_CIDR.0, SERVICE_CIDR.1
                    ),
                )),
                Ok(ip) if ips.contains(&ip) && !keep.0.contains(&ip) => {
                    errs.push(FieldError::invalid(
                        "spec.clusterIPs",
                        json!([asked]),
                        format!("failed to allocate IP {asked}: provided IP is already allocated"),
                    ))
                }
                Ok(ip) => {
                    reserved.ips.insert(ip, Instant::now());
                }
                Err(_) => errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    Value::from(asked),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )),
            },
        }
        let ip = spec_str(obj, "clusterIP").to_string();
        if !ip.is_empty() {
            obj["spec"]["clusterIPs"] = json!([ip]);
        }
        if has_node_ports(obj) {
            for (idx, port) in ports_mut(obj).into_iter().enumerate() {
                match port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) {
                    0 => match free_port(&ports) {
                        Some(n) => {
                            ports.insert(n);
                            reserved.ports.insert(n, Instant::now());
                            port.insert("nodePort".into(), json!(n));
                        }
                        None => errs.push(FieldError::invalid(
                            format!("spec.ports[{idx}].nodePort"),
                            Value::Null,
                            "failed to allocate a nodePort: range is full",
                        )),
                    },
                    n if !NODE_PORTS.contains(&n) => errs.push(FieldError::invalid(
                        format!("spec.ports[{idx}].nodePort"),
                        json!(n),
                        format!(
                            "provided port is not in the valid range. The range of valid ports is {}-{}",
                            NODE_PORTS.start(),
                            NODE_PORTS.end()
                        ),
                    )),
                    n if ports.contains(&n) && !keep.1.contains(&n) => errs.push(FieldError::invalid(
                        format!("spec.ports[{idx}].nodePort"),
                        json!(n),
                        "provided port is already allocated",
                    )),
                    n => {
                        ports.insert(n);
                        reserved.ports.insert(n, Instant::now());
                    }
                }
            }
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }
}

/// A free address of the range, starting at a random offset (the network address and the
/// `kubernetes` Service's are never handed out).
fn free_ip(used: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let (base, prefix) = SERVICE_CIDR;
    let size = 1u32 << (32 - prefix);
    let start = rand::random_range(2..size - 1);
    (0..size - 3)
        .map(|k| 2 + (start - 2 + k) % (size - 3))
        .map(|off| Ipv4Addr::from(u32::from(base) + off))
        .find(|ip| !used.contains(ip))
}

/// A free node port, starting at a random one.
fn free_port(used: &HashSet<i64>) -> Option<i64> {
    let (lo, hi) = (*NODE_PORTS.start(), *NODE_PORTS.end());
    let n = hi - lo + 1;
    let start = rand::random_range(0..n);
    (0..n)
        .map(|k| lo + (start + k) % n)
        .find(|p| !used.contains(p))
}

impl Strategy for ServiceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::service(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::service::validate_service(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = api::validation::service::validate_service(new);
        errs.extend(api::validation::service::validate_service_update(new, old));
        errs
    }

    /// An update that leaves out the assigned cluster IP or node ports keeps them (`kubectl
    /// apply` never sends them), as upstream's `patchAllocatedValues`.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if spec_str(new, "type") == "ExternalName" {
            return;
        }
        if spec_str(new, "clusterIP").is_empty() && !spec_str(old, "clusterIP").is_empty() {
            new["spec"]["clusterIP"] = json!(spec_str(old, "clusterIP"));
            if let Some(ips) = old.pointer("/spec/clusterIPs").cloned() {
                new["spec"]["clusterIPs"] = ips;
            }
        }
        if has_node_ports(new) && has_node_ports(old) {
            let old_ports: Vec<Value> = arr(old, &["spec", "ports"]).to_vec();
            for port in ports_mut(new) {
                if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let same = old_ports.iter().find(|o| {
                    o.get("port") == port.get("port") && o.get("protocol") == port.get("protocol")
                });
                if let Some(n) = same.and_then(|o| o.get("nodePort")).cloned() {
                    port.insert("nodePort".into(), n);
                }
            }
        }
    }

    fn allocate(&self, obj: &mut Value, cluster: &dyn Cluster) -> Result<(), Vec<FieldError>> {
        self.assign(obj, cluster, (&HashSet::new(), &HashSet::new()))
    }

    fn allocate_update(
        &self,
        new: &mut Value,
        old: &Value,
        cluster: &dyn Cluster,
    ) -> Result<(), Vec<FieldError>> {
        let mut ips = HashSet::new();
        if let Ok(ip) = spec_str(old, "clusterIP").parse::<Ipv4Addr>() {
            ips.insert(ip);
        }
        let ports: HashSet<i64> = arr(old, &["spec", "ports"])
            .iter()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect();
        self.assign(new, cluster, (&ips, &ports))
    }
}

fn service_columns() -> Vec<Column> {
    use Desc::Field;
    const SPEC: &str = "io.k8s.api.core.v1.ServiceSpec";
    vec![
        NAME,
        col("Type", "string", 0, Field(SPEC, "type")),
        col("Cluster-IP", "string", 0, Field(SPEC, "clusterIP")),
        col("External-IP", "string", 0, Field(SPEC, "externalIPs")),
        col("Port(s)", "string", 0, Field(SPEC, "ports")),
        AGE,
        col("Selector", "string", 1, Field(SPEC, "selector")),
    ]
}

/// Upstream's `getServiceExternalIP`.
fn external_ip(svc: &Value) -> String {
    let externals: Vec<&str> = arr(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match s(svc, &["spec", "type"]) {
        "ClusterIP" | "NodePort" | "" => {
            if externals.is_empty() {
                "<none>".into()
            } else {
                externals.join(",")
            }
        }
        "LoadBalancer" => {
            let mut all: Vec<String> = arr(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .map(|i| {
                    let ip = s(i, &["ip"]);
                    if ip.is_empty() {
                        s(i, &["hostname"]).to_string()
                    } else {
                        ip.to_string()
                    }
                })
                .filter(|x| !x.is_empty())
                .collect();
            all.extend(externals.iter().map(|e| e.to_string()));
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => s(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".into(),
    }
}

/// Upstream's `makePortString`: `80/TCP`, `80:30080/TCP`.
fn port_string(svc: &Value) -> String {
    let pieces: Vec<String> = arr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let protocol = s(p, &["protocol"]);
            match i(p, &["nodePort"]) {
                0 => format!("{}/{protocol}", i(p, &["port"])),
                n => format!("{}:{n}/{protocol}", i(p, &["port"])),
            }
        })
        .collect();
    if pieces.is_empty() {
        "<none>".into()
    } else {
        pieces.join(",")
    }
}

fn service_row(svc: &Value, now: Timestamp) -> Row {
    let cluster_ip = arr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    plain(vec![
        name_cell(svc),
        json!(s(svc, &["spec", "type"])),
        json!(cluster_ip),
        json!(external_ip(svc)),
        json!(port_string(svc)),
        age_cell(svc, now),
        json!(format_labels(get(svc, &["spec", "selector"]))),
    ])
}

fn endpoints_columns() -> Vec<Column> {
    vec![
        NAME,
        col(
            "Endpoints",
            "string",
            0,
            Desc::Field("io.k8s.api.core.v1.Endpoints", "subsets"),
        ),
        AGE,
    ]
}

/// Upstream's `formatEndpoints`: up to three `ip:port`s, then `+ N more...`.
fn format_endpoints(ep: &Value) -> String {
    let subsets = arr(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    for ss in subsets {
        let addresses = arr(ss, &["addresses"]);
        let ports = arr(ss, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            list.extend(
                addresses
                    .iter()
                    .map(|a| s(a, &["ip"]).to_string())
                    .take(MAX.saturating_sub(list.len())),
            );
            continue;
        }
        for port in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    break;
                }
                let ip = s(a, &["ip"]);
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip.to_string()
                };
                list.push(format!("{host}:{}", i(port, &["port"])));
            }
        }
    }
    let joined = list.join(",");
    if count > MAX {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn endpoints_row(ep: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(ep),
        json!(format_endpoints(ep)),
        age_cell(ep, now),
    ])
}

/// The `kubernetes` Service every cluster has in `default`: the API server at the range's first
/// address, port 443 to its own port.
pub fn kubernetes_service(target_port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": KUBERNETES_SERVICE_IP.to_string(),
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": target_port}]},
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    struct Services(Vec<Value>);

    impl Cluster for Services {
        fn objects(&self, _: &str, plural: &str) -> Vec<Value> {
            if plural == "services" {
                self.0.clone()
            } else {
                Vec::new()
            }
        }
    }

    fn svc(spec: Value) -> Value {
        let mut v = json!({"metadata": {"name": "s", "namespace": "d"}, "spec": spec});
        api::defaults::service(&mut v);
        v
    }

    #[test]
    fn assigns_unique_ips_and_node_ports() {
        let strategy = ServiceStrategy::default();
        let taken = svc(
            json!({"clusterIP": "10.96.0.10", "type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        let cluster = Services(vec![taken]);
        let mut a = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        strategy.allocate(&mut a, &cluster).unwrap();
        let ip: Ipv4Addr = spec_str(&a, "clusterIP").parse().unwrap();
        assert!(in_range(ip) && ip != Ipv4Addr::new(10, 96, 0, 10) && ip != KUBERNETES_SERVICE_IP);
        assert_eq!(a["spec"]["clusterIPs"], json!([ip.to_string()]));
        let port = a["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!(NODE_PORTS.contains(&port) && port != 30080);

        let mut headless = svc(json!({"clusterIP": "None"}));
        strategy.allocate(&mut headless, &cluster).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));

        let mut clash = svc(json!({"clusterIP": "10.96.0.10", "ports": [{"port": 1}]}));
        let errs = strategy.allocate(&mut clash, &cluster).unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .contains("provided IP is already allocated")
        );
        let mut outside = svc(json!({"clusterIP": "192.168.0.1", "ports": [{"port": 1}]}));
        let errs = strategy.allocate(&mut outside, &cluster).unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .contains("is not in the valid range. The range of valid IPs is 10.96.0.0/12")
        );
        let mut bad_port = svc(json!({"type": "NodePort", "ports": [{"port": 1, "nodePort": 80}]}));
        let errs = strategy.allocate(&mut bad_port, &cluster).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
    }

    #[test]
    fn updates_keep_assigned_values_they_leave_out() {
        let strategy = ServiceStrategy::default();
        let old = svc(
            json!({"type": "NodePort", "clusterIP": "10.96.3.4", "clusterIPs": ["10.96.3.4"],
            "ports": [{"port": 80, "nodePort": 31000}]}),
        );
        let mut new = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        strategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"]["clusterIP"], "10.96.3.4");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 31000);
        let cluster = Services(vec![old.clone()]);
        strategy.allocate_update(&mut new, &old, &cluster).unwrap();
    }

    #[test]
    fn rows() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        let lb = json!({"metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "selector": {"app": "web"},
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}});
        assert_eq!(
            Value::Array(service_row(&lb, now).0),
            json!([
                "web",
                "LoadBalancer",
                "10.96.0.5",
                "<pending>",
                "80:30080/TCP,443/TCP",
                "60s",
                "app=web"
            ])
        );
        let ep = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"port": 80}, {"port": 81}]}]});
        assert_eq!(
            format_endpoints(&ep),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:81 + 1 more..."
        );
        assert_eq!(format_endpoints(&json!({})), "<none>");
    }
}
