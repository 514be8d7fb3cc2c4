//! What keeps the API to its owner: files holding secrets readable by their owner only, bearer
//! tokens required and compared in constant time, tokens kept out of logs, TLS 1.2 or newer only.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;

use rollwright::control_plane::{ControlPlane, Options, StoreKind};
use std::{os::unix::fs::PermissionsExt, path::Path};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

async fn start(dir: &Path) -> ControlPlane {
    ControlPlane::start(Options {
        data_dir: dir.to_path_buf(),
        port: 0,
        store: StoreKind::Sqlite,
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn files_holding_secrets_are_readable_by_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let cp = start(dir.path()).await;
    let secrets = ["kubeconfig", "pki/token", "pki/server.key"];
    for file in secrets {
        assert_eq!(mode(&dir.path().join(file)), 0o600, "{file}");
    }
    assert_eq!(mode(&dir.path().join("pki")), 0o700, "pki/");
    cp.stop().await;

    // A kubeconfig an older version left world-readable is narrowed when it is rewritten.
    std::fs::set_permissions(
        dir.path().join("kubeconfig"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let cp = start(dir.path()).await;
    assert_eq!(mode(&dir.path().join("kubeconfig")), 0o600);
    let kubeconfig = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains(cp.token()),
        "the rewrite keeps the contents"
    );
    cp.stop().await;
}
