//! The certificate generators that a large part of the ecosystem's charts run as Jobs to
//! bootstrap their webhooks, honoured as a real run would do what their arguments plainly say:
//!
//! - ingress-nginx's `kube-webhook-certgen create --host=A,B --namespace=NS --secret-name=NAME
//!   [--cert-name=cert] [--key-name=key]`: if the Secret is absent, a CA and a serving
//!   certificate for the hosts, stored as `ca`, `cert` and `key`; if present, nothing.
//! - `kube-webhook-certgen patch --webhook-name=NAME --namespace=NS --secret-name=NAME
//!   [--patch-validating=true] [--patch-mutating=true] [--patch-failure-policy=Fail]
//!   [--apiservice-name=NAME]`: the Secret's `ca` as the `caBundle` of every webhook of the named
//!   Validating/MutatingWebhookConfiguration (and `failurePolicy: Fail` when asked; the tool's
//!   own `Ignore` case sets nothing), or of the APIService.
//! - Contour's `contour certgen --kube --incluster [--overwrite] [--secrets-format=legacy|compact]
//!   [--secrets-name-prefix=P] --namespace=NS`: Secrets `contourcert` and `envoycert`
//!   (`kubernetes.io/tls`; compact: `ca.crt`, `tls.crt`, `tls.key`; legacy: the pair, and the CA
//!   in `cacert`'s `cacert.pem`), labelled `app: contour`.
//!
//! Each runs with the rights of the pod's ServiceAccount: the kubelet's projected token is
//! authenticated by the API server (a TokenReview, which a node may create) and the requests go
//! as the user it names, so RBAC decides as in a real run, and a refusal fails the container
//! with exit code 1, as the tools' fatal log does. Keys are ECDSA P-256 (kube-webhook-certgen's
//! own; Contour's are RSA 2048, which the crate used here does not generate).

use base64::Engine as _;
use k8s_openapi::{
    ByteString,
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        authentication::v1::{TokenReview, TokenReviewSpec},
        core::v1::{Container, Pod, Secret},
    },
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use std::collections::BTreeMap;

/// The mount path of the ServiceAccount token the tools read (`rest.InClusterConfig`).
const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What a recognised generator was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// `kube-webhook-certgen create`.
    Create {
        /// `--host`, split at commas.
        hosts: Vec<String>,
        /// `--namespace`.
        namespace: String,
        /// `--secret-name`.
        secret: String,
        /// `--cert-name`.
        cert_name: String,
        /// `--key-name`.
        key_name: String,
    },
    /// `kube-webhook-certgen patch`.
    Patch {
        /// `--webhook-name`.
        webhook: String,
        /// `--namespace`.
        namespace: String,
        /// `--secret-name`.
        secret: String,
        /// `--patch-validating`.
        validating: bool,
        /// `--patch-mutating`.
        mutating: bool,
        /// `--patch-failure-policy` as the tool applies it (only `Fail` is set).
        failure_policy: Option<String>,
        /// `--apiservice-name`.
        api_service: Option<String>,
    },
    /// `contour certgen --kube`.
    Contour {
        /// `--namespace`.
        namespace: String,
        /// `--overwrite`.
        overwrite: bool,
        /// `--secrets-format=compact` (else legacy).
        compact: bool,
        /// `--secrets-name-prefix`.
        prefix: String,
    },
    /// Recognised, but its arguments make it exit 1 (an unknown flag, a missing required one).
    Refused(String),
}

/// A generator a container runs, with where its token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    /// What it does.
    pub task: Task,
    /// The key (`volume/path`) the kubelet holds the container's ServiceAccount token under;
    /// `None` if it mounts none (the tool then fails: no in-cluster configuration).
    pub token_key: Option<String>,
}

fn basename(s: &str) -> &str {
    let name = s.rsplit('/').next().unwrap_or(s);
    name.split([':', '@']).next().unwrap_or(name)
}

/// Flags as pflag and kingpin read them: `--name=value`, `--name value`, a bare boolean.
struct Flags {
    values: BTreeMap<String, String>,
    unknown: Option<String>,
}

fn parse_flags(args: &[String], known: &[&str], booleans: &[&str]) -> Flags {
    let mut values = BTreeMap::new();
    let mut unknown = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        // Positional arguments (contour's output directory) change nothing here.
        let Some(flag) = a.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (flag.to_string(), None),
        };
        let boolean = booleans.contains(&name.as_str())
            || name
                .strip_prefix("no-")
                .is_some_and(|n| booleans.contains(&n));
        if !known.contains(&name.as_str()) && !boolean {
            unknown.get_or_insert_with(|| format!("unknown flag: --{name}"));
            continue;
        }
        let value = match value {
            Some(v) => v,
            None if boolean => match name.strip_prefix("no-") {
                Some(n) => {
                    values.insert(n.to_string(), "false".into());
                    continue;
                }
                None => "true".into(),
            },
            None => match it.next() {
                Some(v) => v.clone(),
                None => {
                    unknown.get_or_insert_with(|| format!("flag needs an argument: --{name}"));
                    continue;
                }
            },
        };
        values.insert(name, value);
    }
    Flags { values, unknown }
}

impl Flags {
    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    fn flag(&self, name: &str, default: bool) -> bool {
        self.get(name).map_or(default, |v| v == "true" || v == "1")
    }
}

/// kube-webhook-certgen's subcommands.
fn webhook_certgen(args: &[String]) -> Option<Task> {
    let (sub, rest) = args.split_first()?;
    let common = ["log-level", "log-format", "kubeconfig"];
    let refuse = |why: String| Some(Task::Refused(why));
    match sub.as_str() {
        "create" => {
            let known = [
                &common[..],
                &["host", "secret-name", "namespace", "cert-name", "key-name"],
            ]
            .concat();
            let f = parse_flags(rest, &known, &[]);
            if let Some(e) = f.unknown {
                return refuse(e);
            }
            let required = ["host", "secret-name", "namespace"];
            let missing: Vec<&str> = required
                .iter()
                .copied()
                .filter(|r| f.get(r).is_none())
                .collect();
            if !missing.is_empty() {
                return refuse(format!(
                    "required flag(s) \"{}\" not set",
                    missing.join("\", \"")
                ));
            }
            Some(Task::Create {
                hosts: f
                    .get("host")
                    .unwrap_or_default()
                    .split(',')
                    .map(str::to_string)
                    .collect(),
                namespace: f.get("namespace").unwrap_or_default().into(),
                secret: f.get("secret-name").unwrap_or_default().into(),
                cert_name: f.get("cert-name").unwrap_or("cert").into(),
                key_name: f.get("key-name").unwrap_or("key").into(),
            })
        }
        "patch" => {
            let known = [
                &common[..],
                &[
                    "secret-name",
                    "namespace",
                    "webhook-name",
                    "apiservice-name",
                    "patch-failure-policy",
                ],
            ]
            .concat();
            let f = parse_flags(rest, &known, &["patch-validating", "patch-mutating"]);
            if let Some(e) = f.unknown {
                return refuse(e);
            }
            if f.get("secret-name").is_none() || f.get("namespace").is_none() {
                return refuse("required flag(s) \"namespace\", \"secret-name\" not set".into());
            }
            let validating = f.flag("patch-validating", true);
            let mutating = f.flag("patch-mutating", true);
            let api_service = f.get("apiservice-name").map(str::to_string);
            if !validating && !mutating && api_service.is_none() {
                return refuse("patch-validating=false, patch-mutating=false. You must patch at least one kind of webhook, otherwise this command is a no-op".into());
            }
            let failure_policy = match f.get("patch-failure-policy").unwrap_or_default() {
                // The tool's switch has an empty `Ignore` case: only `Fail` is applied.
                "" | "Ignore" => None,
                "Fail" => Some("Fail".to_string()),
                other => return refuse(format!("patch-failure-policy {other} is not valid")),
            };
            Some(Task::Patch {
                webhook: f.get("webhook-name").unwrap_or_default().into(),
                namespace: f.get("namespace").unwrap_or_default().into(),
                secret: f.get("secret-name").unwrap_or_default().into(),
                validating,
                mutating,
                failure_policy,
                api_service,
            })
        }
        // `version`, help: nothing to write.
        _ => None,
    }
}

/// `contour certgen`.
fn contour_certgen(args: &[String], env_namespace: Option<&str>) -> Option<Task> {
    let (sub, rest) = args.split_first()?;
    if sub != "certgen" {
        return None;
    }
    let known = [
        "kubeconfig",
        "namespace",
        "certificate-lifetime",
        "secrets-format",
        "secrets-name-prefix",
    ];
    let booleans = ["kube", "yaml", "pem", "incluster", "overwrite"];
    let f = parse_flags(rest, &known, &booleans);
    if let Some(e) = f.unknown {
        return Some(Task::Refused(e));
    }
    // Only the Kubernetes output writes anything the cluster sees.
    if !f.flag("kube", false) {
        return None;
    }
    let compact = match f.get("secrets-format").unwrap_or("legacy") {
        "legacy" => false,
        "compact" => true,
        other => {
            return Some(Task::Refused(format!(
                "unsupported Secrets format \"{other}\""
            )));
        }
    };
    Some(Task::Contour {
        namespace: f
            .get("namespace")
            .or(env_namespace)
            .unwrap_or("projectcontour")
            .into(),
        overwrite: f.flag("overwrite", false),
        compact,
        prefix: f.get("secrets-name-prefix").unwrap_or_default().into(),
    })
}

/// The token key of the ServiceAccount token mounted where the tools read it.
fn token_key(container: &Container, pod: &Pod) -> Option<String> {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == TOKEN_DIR)?;
    crate::tokens::sources(pod)
        .into_iter()
        .find(|s| s.volume == mount.name && s.audience.is_none())
        .map(|s| s.key())
}

impl Tool {
    /// The generator `container` runs, recognised by its image or command and its arguments;
    /// `None` for any other container.
    pub fn of(container: &Container, pod: &Pod) -> Option<Tool> {
        let image = basename(container.image.as_deref().unwrap_or_default());
        let (command, args) = command::expanded_args(container, pod)?;
        let (program, args) = match command.split_first() {
            Some((first, rest)) => (
                basename(first).to_string(),
                rest.iter().chain(&args).cloned().collect::<Vec<_>>(),
            ),
            None => (image.to_string(), args),
        };
        let env_namespace = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "CONTOUR_NAMESPACE")
            .and_then(|e| {
                e.value.clone().or_else(|| {
                    let path = &e.value_from.as_ref()?.field_ref.as_ref()?.field_path;
                    (path == "metadata.namespace")
                        .then(|| pod.metadata.namespace.clone())
                        .flatten()
                })
            });
        let task = match program.as_str() {
            "kube-webhook-certgen" => webhook_certgen(&args)?,
            "contour" => contour_certgen(&args, env_namespace.as_deref())?,
            _ => return None,
        };
        Some(Tool {
            task,
            token_key: token_key(container, pod),
        })
    }
}

/// Why a run failed (its exit code is 1, as a fatal log ends the tools).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The arguments were refused.
    #[error("{0}")]
    Arguments(String),
    /// No ServiceAccount token is mounted, or it does not authenticate.
    #[error("unable to load in-cluster configuration: {0}")]
    InCluster(String),
    /// An API request failed.
    #[error("{0}: {1}")]
    Api(&'static str, kube::Error),
    /// The certificates could not be made.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A precondition of the tool failed.
    #[error("{0}")]
    Precondition(String),
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The user a ServiceAccount token names, as the API server authenticates it (a TokenReview
/// made by the node, which upstream's `system:node` role allows).
pub async fn authenticate(node: &Client, token: &str) -> Result<authz::UserInfo, Failure> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..Default::default()
    };
    let api: Api<TokenReview> = Api::all(node.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| Failure::Api("reviewing the ServiceAccount token", e))?;
    let status = answer.status.unwrap_or_default();
    let user = status.user.filter(|_| status.authenticated == Some(true));
    let Some(user) = user else {
        return Err(Failure::InCluster(
            status.error.unwrap_or_else(|| "Unauthorized".into()),
        ));
    };
    let groups: Vec<String> = user.groups.unwrap_or_default();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    Ok(authz::UserInfo::new(
        user.username.unwrap_or_default(),
        &groups,
    ))
}

/// A CA and a certificate it signs for `hosts` (IP addresses as IP SANs), PEM: (ca, cert,
/// key). `organizations` are the CA's and the leaf's subject organisations, `leaf_cn` the
/// leaf's common name.
fn generate(
    hosts: &[String],
    organizations: (&str, &str),
    ca_cn: Option<&str>,
    leaf_cn: Option<&str>,
) -> Result<(String, String, String), Failure> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(rcgen::DnType::OrganizationName, organizations.0);
    if let Some(cn) = ca_cn {
        ca.distinguished_name.push(rcgen::DnType::CommonName, cn);
    }
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    ca.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let mut leaf = rcgen::CertificateParams::new(hosts.to_vec())?;
    leaf.distinguished_name
        .push(rcgen::DnType::OrganizationName, organizations.1);
    if let Some(cn) = leaf_cn {
        leaf.distinguished_name.push(rcgen::DnType::CommonName, cn);
    }
    leaf.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

fn bytes(s: &str) -> ByteString {
    ByteString(s.as_bytes().to_vec())
}

/// Runs `task` as the client's user; what it printed is in the log only as the tools' own
/// lines would say, so nothing is returned but success or why not.
pub async fn run(task: &Task, client: &Client) -> Result<(), Failure> {
    match task {
        Task::Refused(why) => Err(Failure::Arguments(why.clone())),
        Task::Create {
            hosts,
            namespace,
            secret,
            cert_name,
            key_name,
        } => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            match secrets.get(secret).await {
                Ok(existing) => {
                    let has_ca = existing.data.as_ref().is_some_and(|d| d.contains_key("ca"));
                    if has_ca {
                        Ok(())
                    } else {
                        Err(Failure::Precondition(
                            "got secret, but it did not contain a 'ca' key".into(),
                        ))
                    }
                }
                Err(e) if not_found(&e) => {
                    let (ca, cert, key) = generate(hosts, ("nil1", "nil2"), None, None)?;
                    let data = BTreeMap::from([
                        ("ca".to_string(), bytes(&ca)),
                        (cert_name.clone(), bytes(&cert)),
                        (key_name.clone(), bytes(&key)),
                    ]);
                    let s = Secret {
                        metadata: ObjectMeta {
                            name: Some(secret.clone()),
                            ..Default::default()
                        },
                        data: Some(data),
                        ..Default::default()
                    };
                    secrets
                        .create(&PostParams::default(), &s)
                        .await
                        .map_err(|e| Failure::Api("failed creating secret", e))?;
                    Ok(())
                }
                Err(e) => Err(Failure::Api("error getting secret", e)),
            }
        }
        Task::Patch {
            webhook,
            namespace,
            secret,
            validating,
            mutating,
            failure_policy,
            api_service,
        } => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let found = match secrets.get(secret).await {
                Ok(s) => s,
                Err(e) if not_found(&e) => {
                    return Err(Failure::Precondition(format!(
                        "no secret with '{secret}' in '{namespace}'"
                    )));
                }
                Err(e) => return Err(Failure::Api("error getting secret", e)),
            };
            let ca = found.data.and_then(|mut d| d.remove("ca")).ok_or_else(|| {
                Failure::Precondition("got secret, but it did not contain a 'ca' key".into())
            })?;
            if let Some(name) = api_service {
                patch_api_service(client, name, &ca).await?;
            }
            if *validating {
                patch_webhooks::<ValidatingWebhookConfiguration>(
                    client,
                    webhook,
                    &ca,
                    failure_policy.as_ref(),
                    (
                        "failed getting validating webhook",
                        "failed patching validating webhook",
                    ),
                )
                .await?;
            }
            if *mutating {
                patch_webhooks::<MutatingWebhookConfiguration>(
                    client,
                    webhook,
                    &ca,
                    failure_policy.as_ref(),
                    (
                        "failed getting mutating webhook",
                        "failed patching mutating webhook",
                    ),
                )
                .await?;
            }
            Ok(())
        }
        Task::Contour {
            namespace,
            overwrite,
            compact,
            prefix,
        } => {
            let names = |service: &str| {
                vec![
                    service.to_string(),
                    format!("{service}.{namespace}"),
                    format!("{service}.{namespace}.svc"),
                    format!("{service}.{namespace}.svc.cluster.local"),
                ]
            };
            // One CA signs both: made once, its key kept for the second leaf.
            let ca_key = rcgen::KeyPair::generate()?;
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
            ca.distinguished_name
                .push(rcgen::DnType::CommonName, "Project Contour");
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca.key_usages = vec![
                rcgen::KeyUsagePurpose::KeyEncipherment,
                rcgen::KeyUsagePurpose::DigitalSignature,
                rcgen::KeyUsagePurpose::KeyCertSign,
            ];
            let ca_pem = ca.self_signed(&ca_key)?.pem();
            let issuer = rcgen::Issuer::new(ca, ca_key);
            let mut pairs = Vec::new();
            for service in ["contour", "envoy"] {
                let key = rcgen::KeyPair::generate()?;
                let mut leaf = rcgen::CertificateParams::new(names(service))?;
                leaf.distinguished_name
                    .push(rcgen::DnType::CommonName, service);
                leaf.key_usages = vec![
                    rcgen::KeyUsagePurpose::DigitalSignature,
                    rcgen::KeyUsagePurpose::DataEncipherment,
                    rcgen::KeyUsagePurpose::KeyEncipherment,
                    rcgen::KeyUsagePurpose::ContentCommitment,
                ];
                let cert = leaf.signed_by(&key, &issuer)?;
                pairs.push((service, cert.pem(), key.serialize_pem()));
            }
            let labels = BTreeMap::from([("app".to_string(), "contour".to_string())]);
            let secret = |name: String, kind: &str, data: BTreeMap<String, ByteString>| Secret {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace.clone()),
                    labels: Some(labels.clone()),
                    ..Default::default()
                },
                type_: Some(kind.to_string()),
                data: Some(data),
                ..Default::default()
            };
            let mut out = Vec::new();
            for (service, cert, key) in &pairs {
                let mut data = BTreeMap::from([
                    ("tls.crt".to_string(), bytes(cert)),
                    ("tls.key".to_string(), bytes(key)),
                ]);
                if *compact {
                    data.insert("ca.crt".into(), bytes(&ca_pem));
                }
                out.push(secret(
                    format!("{prefix}{service}cert"),
                    "kubernetes.io/tls",
                    data,
                ));
            }
            if !compact {
                out.push(secret(
                    format!("{prefix}cacert"),
                    "Opaque",
                    BTreeMap::from([("cacert.pem".to_string(), bytes(&ca_pem))]),
                ));
            }
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            // `WriteSecretsKube`: create; an existing one is replaced under --overwrite, and
            // otherwise ends the run (successfully) there.
            for s in out {
                let name = s.metadata.name.clone().unwrap_or_default();
                match secrets.create(&PostParams::default(), &s).await {
                    Ok(_) => {}
                    Err(e) if already_exists(&e) && !overwrite => return Ok(()),
                    Err(_) => {
                        let mut s = s;
                        if let Ok(current) = secrets.get(&name).await {
                            s.metadata.resource_version = current.metadata.resource_version;
                        }
                        secrets
                            .replace(&name, &PostParams::default(), &s)
                            .await
                            .map_err(|e| Failure::Api("failed output certificates", e))?;
                    }
                }
            }
            Ok(())
        }
    }
}

/// `--apiservice-name`: the CA as the APIService's `caBundle`, TLS verification on.
/// Sets `caBundle` (and `failurePolicy`, when given) on every webhook of the configuration
/// `name`, as the tool's `patch` does, for the validating and the mutating kind alike; `errors`
/// are the tool's messages for a failed read and a failed write.
async fn patch_webhooks<K>(
    client: &Client,
    name: &str,
    ca: &ByteString,
    failure_policy: Option<&String>,
    errors: (&'static str, &'static str),
) -> Result<(), Failure>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let hook = api.get(name).await.map_err(|e| Failure::Api(errors.0, e))?;
    let mut obj = serde_json::to_value(&hook).map_err(|e| Failure::Precondition(e.to_string()))?;
    let bundle = serde_json::json!(base64::engine::general_purpose::STANDARD.encode(&ca.0));
    for h in obj["webhooks"].as_array_mut().into_iter().flatten() {
        h["clientConfig"]["caBundle"] = bundle.clone();
        if let Some(p) = failure_policy {
            h["failurePolicy"] = serde_json::json!(p);
        }
    }
    let hook: K = serde_json::from_value(obj).map_err(|e| Failure::Precondition(e.to_string()))?;
    api.replace(name, &PostParams::default(), &hook)
        .await
        .map_err(|e| Failure::Api(errors.1, e))?;
    Ok(())
}

async fn patch_api_service(client: &Client, name: &str, ca: &ByteString) -> Result<(), Failure> {
    let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}");
    let get = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| Failure::Precondition(e.to_string()))?;
    let mut obj: serde_json::Value = client
        .request(get)
        .await
        .map_err(|e| Failure::Api("failed getting APIService", e))?;
    obj["spec"]["caBundle"] =
        serde_json::json!(base64::engine::general_purpose::STANDARD.encode(&ca.0));
    obj["spec"]["insecureSkipTLSVerify"] = serde_json::json!(false);
    let put = http::Request::put(&path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&obj).unwrap_or_default())
        .map_err(|e| Failure::Precondition(e.to_string()))?;
    client
        .request::<serde_json::Value>(put)
        .await
        .map_err(|e| Failure::Api("failed patching APIService", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(container: serde_json::Value) -> Option<Tool> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ingress-nginx"},
            "spec": {"containers": [container], "volumes": [{"name": "kube-api-access-x",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]},
        }))
        .unwrap();
        let c = pod.spec.as_ref().unwrap().containers[0].clone();
        Tool::of(&c, &pod)
    }

    #[test]
    fn ingress_nginx_and_contour_jobs_are_read_as_their_tools_read_them() {
        let env = json!([{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]);
        let mounts = json!([{"name": "kube-api-access-x", "mountPath": TOKEN_DIR}]);
        let create = tool(json!({"name": "create", "env": env, "volumeMounts": mounts,
            "image": "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v20230407@sha256:543c",
            "args": ["create", "--host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.$(POD_NAMESPACE).svc",
                     "--namespace=$(POD_NAMESPACE)", "--secret-name=ingress-nginx-admission"]}))
        .unwrap();
        assert_eq!(create.token_key.as_deref(), Some("kube-api-access-x/token"));
        assert_eq!(
            create.task,
            Task::Create {
                hosts: vec![
                    "ingress-nginx-controller-admission".into(),
                    "ingress-nginx-controller-admission.ingress-nginx.svc".into()
                ],
                namespace: "ingress-nginx".into(),
                secret: "ingress-nginx-admission".into(),
                cert_name: "cert".into(),
                key_name: "key".into(),
            }
        );
        let patch = tool(json!({"name": "patch", "env": env,
            "image": "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.3.0",
            "args": ["patch", "--webhook-name=ingress-nginx-admission", "--namespace=$(POD_NAMESPACE)",
                     "--patch-mutating=false", "--secret-name", "ingress-nginx-admission",
                     "--patch-failure-policy=Fail"]}))
        .unwrap();
        assert_eq!(patch.token_key, None);
        assert_eq!(
            patch.task,
            Task::Patch {
                webhook: "ingress-nginx-admission".into(),
                namespace: "ingress-nginx".into(),
                secret: "ingress-nginx-admission".into(),
                validating: true,
                mutating: false,
                failure_policy: Some("Fail".into()),
                api_service: None,
            }
        );
        let bad = tool(json!({"name": "c", "image": "kube-webhook-certgen",
            "args": ["create", "--host=a", "--bogus=1"]}))
        .unwrap();
        assert_eq!(bad.task, Task::Refused("unknown flag: --bogus".into()));
        let missing = tool(
            json!({"name": "c", "image": "kube-webhook-certgen", "args": ["create", "--host=a"]}),
        )
        .unwrap();
        assert!(matches!(missing.task, Task::Refused(_)));
        let contour = tool(json!({"name": "contour", "image": "ghcr.io/projectcontour/contour:v1.27.0",
            "command": ["contour"], "env": [{"name": "CONTOUR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
            "args": ["certgen", "--kube", "--incluster", "--overwrite", "--secrets-format=compact",
                     "--namespace=$(CONTOUR_NAMESPACE)"]}))
        .unwrap();
        assert_eq!(
            contour.task,
            Task::Contour {
                namespace: "ingress-nginx".into(),
                overwrite: true,
                compact: true,
                prefix: String::new(),
            }
        );
        // Anything else is no tool.
        assert_eq!(
            tool(json!({"name": "c", "image": "busybox", "args": ["create"]})),
            None
        );
        assert_eq!(
            tool(json!({"name": "c", "image": "kube-webhook-certgen", "args": ["version"]})),
            None
        );
    }

    #[test]
    fn the_certificate_is_for_the_hosts_and_signed_by_the_ca() {
        let (ca, cert, key) = generate(
            &["svc".into(), "svc.ns.svc".into(), "10.0.0.1".into()],
            ("nil1", "nil2"),
            None,
            None,
        )
        .unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.contains("PRIVATE KEY"));
        assert_ne!(ca, cert);
    }
}
