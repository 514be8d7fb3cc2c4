//! Container image names as a container runtime reports them: the fully qualified reference in
//! `containerStatuses[].image`, a digest in `imageID`, and the pull policy's default.

use crate::distribution::stable_hash;

pub use api::image::normalize;

/// `imageID`: the qualified repository and a digest (the image's own, or one derived from its
/// name, so the same image always has the same ID).
pub fn image_id(image: &str) -> String {
    let (repo, suffix) = api::image::split_reference(image);
    let repo = api::image::qualify_repository(repo);
    match suffix.and_then(|s| s.strip_prefix('@')) {
        Some(digest) => format!("{repo}@{digest}"),
        None => format!("{repo}@sha256:{}", hex64(&[image.as_bytes()])),
    }
}

/// A `containerd://` ID, unique per pod, container and restart.
pub fn container_id(pod_uid: &str, container: &str, restart: i32) -> String {
    format!(
        "containerd://{}",
        hex64(&[
            pod_uid.as_bytes(),
            container.as_bytes(),
            &restart.to_le_bytes()
        ])
    )
}

/// A plausible, stable size in bytes for the Pulled event.
pub fn size(image: &str) -> u64 {
    20_000_000 + stable_hash(&[image.as_bytes(), b"size"]) % 180_000_000
}

/// Upstream's default pull policy: `Always` for `:latest` or no tag, else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    let (_, suffix) = api::image::split_reference(image);
    match suffix {
        None => "Always",
        Some(":latest") => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn hex64(parts: &[&[u8]]) -> String {
    (0u8..4)
        .map(|salt| format!("{:016x}", stable_hash(&[&[salt], &parts.concat()])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_qualified_like_containerd() {
        let cases = [
            ("nginx:1.27", "docker.io/library/nginx:1.27"),
            ("nginx", "docker.io/library/nginx:latest"),
            ("bitnami/redis:7", "docker.io/bitnami/redis:7"),
            ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("nginx@sha256:abcd", "docker.io/library/nginx@sha256:abcd"),
        ];
        for (image, want) in cases {
            assert_eq!(normalize(image), want, "{image}");
        }
    }

    #[test]
    fn image_ids_carry_a_stable_digest() {
        let id = image_id("nginx:1.27");
        let digest = id.strip_prefix("docker.io/library/nginx@sha256:").unwrap();
        assert_eq!(digest.len(), 64);
        assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(id, image_id("nginx:1.27"));
        assert_ne!(id, image_id("nginx:1.28"));
        assert_eq!(
            image_id("nginx@sha256:abcd"),
            "docker.io/library/nginx@sha256:abcd"
        );
    }

    #[test]
    fn pull_policy_defaults() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("nginx@sha256:abcd", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn container_ids_differ_per_restart() {
        let a = container_id("uid", "app", 0);
        assert!(a.starts_with("containerd://") && a.len() == "containerd://".len() + 64);
        assert_ne!(a, container_id("uid", "app", 1));
    }
}
