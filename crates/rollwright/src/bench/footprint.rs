//! What the API server's cache and the store's files take per object after a node benchmark:
//! printed by both `bench nodes` scenarios (pods, and `--daemonset` in [`super::fleet`]), so a
//! leaf both use.

/// Prints what the API server's cache holds per pod (and for the events beside them) and what
/// the store's files take per pod on disk.
pub(super) fn print(server: &apiserver::ApiServer, dir: &std::path::Path, pods: usize) {
    let per = |bytes: usize, n: usize| bytes as f64 / n.max(1) as f64;
    for (group, plural, name) in [
        ("", "pods", "pod"),
        ("", "events", "event"),
        ("", "nodes", "node"),
        ("coordination.k8s.io", "leases", "lease"),
    ] {
        if let Some(f) = server.cache_footprint(group, plural) {
            println!(
                "cache: {} {plural}, {:.0} bytes per {name} ({:.0} JSON + {:.0} entry, key, labels and fields); history: {} events keep {} older versions, {:.1} MiB",
                f.objects,
                per(f.json_bytes + f.other_bytes, f.objects),
                per(f.json_bytes, f.objects),
                per(f.other_bytes, f.objects),
                f.history_events,
                f.history_versions,
                f.history_bytes as f64 / 1048576.0,
            );
        }
    }
    println!(
        "events: {} deleted before their TTL to keep within the API server's Event budget",
        server.events_evicted()
    );
    // SQLite's database and its write-ahead log (absent for the memory and etcd stores).
    let disk: u64 = ["store.db", "store.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    if disk > 0 {
        println!(
            "disk: {disk} bytes in store.db and its WAL, {:.0} bytes per pod (pods, their events, nodes and leases)",
            disk as f64 / pods.max(1) as f64
        );
    }
}
