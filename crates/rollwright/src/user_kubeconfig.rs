//! `rollwright kubeconfig`: a kubeconfig for one user of a running (or stopped) control plane,
//! with a client certificate its CA signs, so that people and programs other than the admin get
//! in with only the rights RBAC binds to them.

use anyhow::Context;
use std::path::Path;

/// Writes the kubeconfig of `user` in `groups` for the control plane whose data directory is
/// `data_dir` to `output` (0600), or prints it.
pub fn write(
    data_dir: &Path,
    user: &str,
    groups: &[String],
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let text = kubeconfig(data_dir, user, groups)?;
    match output {
        Some(path) => apiserver::tls::write_private(path, &text)
            .with_context(|| format!("writing {}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// The kubeconfig text: the admin kubeconfig's cluster (server and CA), this user's certificate.
pub fn kubeconfig(data_dir: &Path, user: &str, groups: &[String]) -> anyhow::Result<String> {
    anyhow::ensure!(!user.is_empty(), "--user must name someone");
    let admin = data_dir.join("kubeconfig");
    let admin_text = std::fs::read_to_string(&admin).with_context(|| {
        format!(
            "reading {} (start the control plane once with `rollwright up --data-dir {}`)",
            admin.display(),
            data_dir.display()
        )
    })?;
    let server = admin_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .with_context(|| format!("{} names no server", admin.display()))?;
    let credentials = apiserver::tls::Credentials::load_or_create(&data_dir.join("pki"))?;
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let (cert, key) = credentials.client_certificate(user, &groups)?;
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: rollwright\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: rollwright\n  context:\n    cluster: rollwright\n    user: {user}\n    namespace: default\ncurrent-context: rollwright\npreferences: {{}}\n",
        ca = b64(&credentials.ca_pem),
        cert = b64(&cert),
        key = b64(&key),
        user = yaml_string(user),
    ))
}

/// A YAML scalar that stays one string whatever the name holds (`system:node:x` has colons).
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}
