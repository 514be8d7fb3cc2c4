//! Container image references as a container runtime reports them.
//!
//! A pod spec says `nginx:1.27`; containerd reports `docker.io/library/nginx:1.27` in
//! `containerStatuses[].image`. The simulated kubelet reports the qualified form, and controllers
//! that compare a spec image with a status image (in-place updates) compare qualified forms.

/// The fully qualified reference: `nginx:1.27` -> `docker.io/library/nginx:1.27`,
/// `nginx` -> `docker.io/library/nginx:latest`, `org/app` -> `docker.io/org/app:latest`;
/// references with a registry (`a.b/x`, `host:5000/x`, `localhost/x`) keep it.
pub fn normalize(image: &str) -> String {
    let (repo, suffix) = split_reference(image);
    let repo = qualify_repository(repo);
    match suffix {
        Some(s) => format!("{repo}{s}"),
        None => format!("{repo}:latest"),
    }
}

/// Whether two references name the same image once qualified.
pub fn same(a: &str, b: &str) -> bool {
    a == b || normalize(a) == normalize(b)
}

/// Splits `repo[:tag][@digest]` into the repository and the `:tag` / `@digest` suffix.
pub fn split_reference(image: &str) -> (&str, Option<&str>) {
    if let Some(at) = image.find('@') {
        return (&image[..at], Some(&image[at..]));
    }
    // A ':' after the last '/' is a tag; one before it is a registry port.
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].find(':') {
        Some(c) => (&image[..slash + c], Some(&image[slash + c..])),
        None => (image, None),
    }
}

/// The repository with its registry made explicit (`nginx` -> `docker.io/library/nginx`).
pub fn qualify_repository(repo: &str) -> String {
    let first = repo.split('/').next().unwrap_or("");
    let has_domain =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_domain {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualifies_like_containerd() {
        let cases = [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.27", "docker.io/library/nginx:1.27"),
            ("org/app:2", "docker.io/org/app:2"),
            ("quay.io/org/app:2", "quay.io/org/app:2"),
            ("localhost/app", "localhost/app:latest"),
            ("host:5000/app", "host:5000/app:latest"),
            ("nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "{input}");
        }
        assert!(same("agent:1", "docker.io/library/agent:1"));
        assert!(!same("agent:1", "docker.io/library/agent:2"));
    }
}
