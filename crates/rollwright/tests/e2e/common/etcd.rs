//! Control planes on etcd: the test starts its own etcd members on loopback (in temporary
//! directories, stopped when dropped) and any number of API servers on them.

use super::Cluster;
use rollwright::{
    components::Components,
    control_plane::{ControlPlane, Options, StoreKind},
};
use store::etcd::member::LocalCluster;

/// Starts `members` etcd members. `None`, with the reason printed, only where the etcd binary is
/// missing (CI installs it), so that the rest of the suite does not need etcd.
pub async fn start_etcd(members: usize) -> Option<LocalCluster> {
    if LocalCluster::binary().is_none() {
        eprintln!("skipped: no etcd binary (apt-get install etcd-server)");
        return None;
    }
    Some(LocalCluster::start(members).await.expect("etcd starts"))
}

impl Cluster {
    /// An API server (with `components` in-process) on `etcd`. With `peer`, it shares the peer's
    /// credentials (CA, serving certificate, token), as the API servers of one cluster do, so one
    /// kubeconfig works against either with only the server URL changed.
    pub async fn start_on_etcd(
        etcd: &LocalCluster,
        components: Components,
        peer: Option<&Cluster>,
    ) -> Cluster {
        let options = Options {
            components,
            ..Default::default()
        };
        Cluster::start_on_etcd_with(etcd, options, peer).await
    }

    /// [`Cluster::start_on_etcd`] with `options` (its data directory, port and store are the
    /// test's).
    pub async fn start_on_etcd_with(
        etcd: &LocalCluster,
        options: Options,
        peer: Option<&Cluster>,
    ) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        if let Some(peer) = peer {
            share_credentials(peer.dir.path(), dir.path());
        }
        let cp = ControlPlane::start(Options {
            data_dir: dir.path().to_path_buf(),
            port: 0,
            store: StoreKind::Etcd,
            etcd_servers: etcd.client_urls(),
            ..options
        })
        .await
        .expect("control plane starts on etcd");
        Cluster::own(cp, dir)
    }
}

/// Copies the credentials a data directory holds (`pki/`) into another.
pub fn share_credentials(from: &std::path::Path, to: &std::path::Path) {
    let (from, to) = (from.join("pki"), to.join("pki"));
    std::fs::create_dir_all(&to).expect("pki dir");
    for entry in std::fs::read_dir(&from).expect("peer pki") {
        let entry = entry.expect("pki entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("pki copied");
    }
}
