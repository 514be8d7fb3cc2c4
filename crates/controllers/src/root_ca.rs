//! The root CA certificate publisher, as upstream's
//! `pkg/controller/certificates/rootcacertpublisher` (`--controllers` name
//! `root-ca-cert-publisher`): every namespace holds a ConfigMap `kube-root-ca.crt` whose `ca.crt`
//! is the cluster's root CA bundle. Pods read it to verify the API server on its internal
//! endpoints (`kubernetes.default.svc`): projected service account volumes mount it, and
//! upstream's e2e framework waits for it in every test namespace before a test starts.
//!
//! What it does, as upstream's `publisher.go`, so that clients see the same objects:
//! - a namespace is queued when it appears, and on a later change only while it is `Active`;
//!   any change to or deletion of a ConfigMap named `kube-root-ca.crt` queues its namespace;
//! - a missing ConfigMap is created with data exactly `{ca.crt: bundle}` and the
//!   `kubernetes.io/description` annotation. Not in a namespace that is gone or terminating: the
//!   API server refuses content there, and the refusal is not an error (upstream relies on the
//!   refusal alone; this controller also skips a namespace its cache shows terminating, which
//!   spares the doomed write);
//! - an existing one whose data is not exactly `{ca.crt: bundle}`, or whose description
//!   annotation is missing or empty, is updated: its data replaced by exactly that, the
//!   annotation set, everything else (labels, other annotations, `binaryData`) kept. A
//!   description changed to some other non-empty text is left alone, as upstream leaves it. An
//!   existing ConfigMap is repaired also in a terminating namespace (an update adds no content).
//!
//! It runs only when it knows the bundle ([`Config::bundle`]): `rollwright up` passes the CA it
//! generated, `rollwright controllers` the file of `--root-ca-file` or else its kubeconfig's CA
//! (as kube-controller-manager falls back to its client's CA data). Without one it logs why and
//! does not start, rather than publishing an empty or wrong bundle that pods would then trust.
//!
//! ConfigMaps are cached as dynamic objects (the shared cache has no typed ConfigMap kind, and
//! the garbage collector's generic watch of any extra kind is a dynamic one, so the two would
//! share one watch); an update writes the cached object back whole with only the two fields
//! changed, so no field this crate's types do not know is lost.

use crate::runtime::{Action, Controller, WorkQueue};
use base64::Engine as _;
use informer::{Change, Informer, Informers, Key, Subscription, key};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject, PostParams},
    core::TypeMeta,
};
use serde_json::Value;
use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

/// The ConfigMap every namespace holds (upstream's `RootCACertConfigMapName`).
pub const CONFIG_MAP: &str = "kube-root-ca.crt";
/// Its data key holding the bundle.
pub const CA_KEY: &str = "ca.crt";
/// The annotation describing what the ConfigMap is for.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// Its text, upstream's word for word.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Why a root CA bundle was refused.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file could not be read.
    #[error("reading root CA file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The bundle is not text (a ConfigMap's `data` holds strings).
    #[error("the root CA bundle is not UTF-8 text (a PEM file is expected)")]
    NotText,
    /// A `CERTIFICATE` block does not decode.
    #[error("certificate {index} of the root CA bundle: {reason}")]
    BadCertificate {
        /// Which certificate block (1-based).
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// No `CERTIFICATE` block at all.
    #[error("the root CA bundle holds no PEM CERTIFICATE block")]
    NoCertificates,
}

/// A root CA bundle as published: PEM text with at least one certificate, kept verbatim (the
/// ConfigMap holds the file's bytes, as upstream publishes the `--root-ca-file` it read).
#[derive(Clone, PartialEq, Eq)]
pub struct RootCa(Arc<str>);

impl fmt::Debug for RootCa {
    /// The size, not the PEM: settings are logged in debug output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RootCa({} bytes of PEM)", self.0.len())
    }
}

impl RootCa {
    /// A bundle from PEM text; refused unless it holds at least one certificate block that
    /// decodes (as upstream's `readCA` refuses a file `ParseCertsPEM` finds nothing in), so a
    /// wrong file is an error at start rather than a ConfigMap pods cannot use.
    pub fn from_pem(pem: impl Into<String>) -> Result<Self, BundleError> {
        let pem = pem.into();
        check_pem(&pem)?;
        Ok(Self(pem.into()))
    }

    /// Reads and checks a PEM file (`--root-ca-file`).
    pub fn read(path: &Path) -> Result<Self, BundleError> {
        let bytes = std::fs::read(path).map_err(|source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| BundleError::NotText)?;
        Self::from_pem(text)
    }

    /// A bundle of DER certificates (a client configuration's CA, which `kube` keeps decoded),
    /// encoded as PEM.
    pub fn from_der<C: AsRef<[u8]>>(certs: &[C]) -> Result<Self, BundleError> {
        let engine = base64::engine::general_purpose::STANDARD;
        let mut pem = String::new();
        for cert in certs {
            let b64 = engine.encode(cert.as_ref());
            pem.push_str("-----BEGIN CERTIFICATE-----\n");
            // Base64 is ASCII, so 64-byte chunks are 64-character lines.
            for line in b64.as_bytes().chunks(64) {
                pem.push_str(&String::from_utf8_lossy(line));
                pem.push('\n');
            }
            pem.push_str("-----END CERTIFICATE-----\n");
        }
        Self::from_pem(pem)
    }

    /// The PEM text.
    pub fn pem(&self) -> &str {
        &self.0
    }
}

/// Checks that `pem` holds at least one `CERTIFICATE` block whose body is base64 of a DER
/// SEQUENCE. Other blocks are skipped, as Go's `ParseCertsPEM` skips them; the certificates are
/// not parsed further (the API server's clients do that when they verify with the bundle).
fn check_pem(pem: &str) -> Result<(), BundleError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let engine = base64::engine::general_purpose::STANDARD;
    let mut found = 0usize;
    let mut body: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        match &mut body {
            None if line == BEGIN => body = Some(String::new()),
            None => {}
            Some(b) if line == END => {
                found += 1;
                let bad = |reason: String| BundleError::BadCertificate {
                    index: found,
                    reason,
                };
                let der = engine
                    .decode(b.as_bytes())
                    .map_err(|e| bad(format!("not base64: {e}")))?;
                if der.first() != Some(&0x30) {
                    return Err(bad("not a DER certificate".into()));
                }
                body = None;
            }
            Some(b) => b.push_str(line),
        }
    }
    if body.is_some() {
        return Err(BundleError::BadCertificate {
            index: found + 1,
            reason: format!("no {END} line"),
        });
    }
    if found == 0 {
        return Err(BundleError::NoCertificates);
    }
    Ok(())
}

/// Why a sync failed (it is retried with back-off).
pub type Error = crate::runtime::ApiError;

/// How the publisher runs.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The bundle to publish; without one the controller does not start.
    pub bundle: Option<RootCa>,
    /// How it runs: concurrent syncs (upstream runs one); retry delays of failed syncs.
    pub run: crate::runtime::Config<1>,
}

/// The publisher: the shared cache's namespaces and ConfigMaps and a queue of namespace names.
pub struct RootCaCertPublisher {
    client: Client,
    bundle: RootCa,
    namespaces: Informer<Namespace>,
    config_maps: Informer<DynamicObject>,
    queue: WorkQueue<Key>,
}

impl Controller for RootCaCertPublisher {
    const NAME: &'static str = "root-ca-cert-publisher";
    type Key = Key;
    type Error = Error;

    fn queue(&self) -> &WorkQueue<Key> {
        &self.queue
    }

    fn watch(self: &Arc<Self>) -> Vec<Subscription> {
        let on_ns = Arc::clone(self);
        let on_cm = Arc::clone(self);
        vec![
            self.namespaces
                .subscribe(move |c: &Change<Namespace>| match c {
                    Change::Added(ns) => on_ns.queue.add(ns.name_any()),
                    // Upstream's `namespaceUpdated`: a terminating namespace is not given its
                    // ConfigMap back.
                    Change::Updated { new, .. } if phase(new) == Some("Active") => {
                        on_ns.queue.add(new.name_any())
                    }
                    Change::Updated { .. } | Change::Deleted(_) => {}
                }),
            // Upstream handles updates and deletions; an addition is queued too, so that a
            // create the server finds already done waits for that object's event instead of
            // retrying.
            self.config_maps
                .subscribe(move |c: &Change<DynamicObject>| {
                    let cm = c.object();
                    if cm.metadata.name.as_deref() == Some(CONFIG_MAP)
                        && let Some(ns) = &cm.metadata.namespace
                    {
                        on_cm.queue.add(ns.clone());
                    }
                }),
        ]
    }

    async fn reconcile(self: &Arc<Self>, namespace: Key) -> Result<Action, Error> {
        // A namespace the cache does not hold is gone (or not yet seen: its addition queues it).
        let Some(ns) = self.namespaces.get(&namespace) else {
            return Ok(Action::await_change());
        };
        match self.config_maps.get(&key(&namespace, CONFIG_MAP)) {
            None if terminating(&ns) => Ok(Action::await_change()),
            None => self.create(&namespace).await,
            Some(cm) if is_current(&cm, &self.bundle) => Ok(Action::await_change()),
            Some(cm) => self.repair(&namespace, cm.object().clone()).await,
        }
    }
}

impl RootCaCertPublisher {
    /// The publisher of `bundle` on the shared cache.
    pub fn new(informers: &Informers, bundle: RootCa, config: Config) -> Arc<Self> {
        Arc::new(Self {
            client: informers.client().clone(),
            bundle,
            namespaces: informers.get(),
            config_maps: informers.dynamic(&ApiResource::erase::<ConfigMap>(&())),
            queue: config.run.queue(),
        })
    }

    fn data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(CA_KEY.to_string(), self.bundle.pem().to_string())])
    }

    async fn create(&self, namespace: &str) -> Result<Action, Error> {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(CONFIG_MAP.to_string()),
                namespace: Some(namespace.to_string()),
                annotations: Some(BTreeMap::from([(
                    DESCRIPTION_ANNOTATION.to_string(),
                    DESCRIPTION.to_string(),
                )])),
                ..Default::default()
            },
            data: Some(self.data()),
            ..Default::default()
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &cm).await {
            Ok(_) => {
                tracing::debug!(namespace, "published {CONFIG_MAP}");
                Ok(Action::await_change())
            }
            // Already there (the cache lags; its event queues the namespace again), or the
            // namespace is gone or terminating (upstream does not retry those either).
            Err(kube::Error::Api(s))
                if s.code == 409
                    || s.code == 404
                    || crate::util::api_error::namespace_terminating(&s) =>
            {
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `cm` back with data exactly `{ca.crt: bundle}` and the description annotation, at
    /// its cached resourceVersion (a concurrent change wins, and its event queues another look).
    async fn repair(&self, namespace: &str, mut cm: DynamicObject) -> Result<Action, Error> {
        cm.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        });
        let data = serde_json::json!(self.data());
        match cm.data.as_object_mut() {
            Some(fields) => {
                fields.insert("data".into(), data);
            }
            None => cm.data = serde_json::json!({ "data": data }),
        }
        cm.metadata
            .annotations
            .get_or_insert_default()
            .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            namespace,
            &ApiResource::erase::<ConfigMap>(&()),
        );
        match api.replace(CONFIG_MAP, &PostParams::default(), &cm).await {
            Ok(_) => {
                tracing::info!(namespace, "restored {CONFIG_MAP} changed by someone else");
                Ok(Action::await_change())
            }
            // Changed or deleted since the cache's version: that event queues it again.
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                Ok(Action::await_change())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Starts the publisher as `--controllers` enables it, or, without a bundle, only says why it
/// does not run (upstream starts it only with a root CA to publish).
pub(crate) fn start(informers: &Informers, settings: &crate::Settings) -> crate::Start {
    let config = settings.root_ca.clone();
    match config.bundle.clone() {
        Some(bundle) => crate::on_cache(informers, (bundle, config), |i, (bundle, config)| {
            RootCaCertPublisher::new(i, bundle, config)
        }),
        None => Box::new(|| {
            Box::pin(async {
                tracing::warn!(
                    controller = RootCaCertPublisher::NAME,
                    "not started: no root CA to publish (pass --root-ca-file, or a kubeconfig \
                     whose cluster has certificate-authority data); namespaces get no \
                     kube-root-ca.crt ConfigMap"
                );
            })
        }),
    }
}

fn phase(ns: &Namespace) -> Option<&str> {
    ns.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some() || phase(ns) == Some("Terminating")
}

/// Whether `cm` needs no update: data exactly `{ca.crt: bundle}` and a non-empty description
/// (upstream's `reflect.DeepEqual(cm.Data, data) && len(annotation) > 0`).
fn is_current(cm: &DynamicObject, bundle: &RootCa) -> bool {
    let data_ok = cm
        .data
        .get("data")
        .and_then(Value::as_object)
        .is_some_and(|d| {
            d.len() == 1 && d.get(CA_KEY).and_then(Value::as_str) == Some(bundle.pem())
        });
    let described = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    data_ok && described
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A self-signed certificate's DER is a SEQUENCE; these bytes stand in for one.
    const DER: &[u8] = &[0x30, 0x03, 0x02, 0x01, 0x01];

    #[test]
    fn bundles_need_a_certificate_block_that_decodes() {
        let ca = RootCa::from_der(&[DER]).unwrap();
        assert_eq!(
            ca.pem(),
            "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"
        );
        // Other blocks are skipped; the text is kept verbatim.
        let with_key = format!(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{}",
            ca.pem()
        );
        assert_eq!(RootCa::from_pem(with_key.clone()).unwrap().pem(), with_key);
        assert!(matches!(
            RootCa::from_pem("hello"),
            Err(BundleError::NoCertificates)
        ));
        assert!(matches!(
            RootCa::from_der::<&[u8]>(&[]),
            Err(BundleError::NoCertificates)
        ));
        assert!(matches!(
            RootCa::from_pem("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n"),
            Err(BundleError::BadCertificate { index: 1, .. })
        ));
        assert!(matches!(
            RootCa::from_pem("-----BEGIN CERTIFICATE-----\nMAMCAQE=\n"),
            Err(BundleError::BadCertificate { index: 1, .. })
        ));
        // Long certificates wrap at 64 characters.
        let long = RootCa::from_der(&[[0x30; 100]]).unwrap();
        assert!(
            long.pem()
                .lines()
                .all(|l| l.len() <= 64 || l.starts_with("-----"))
        );
        assert_eq!(
            format!("{long:?}"),
            format!("RootCa({} bytes of PEM)", long.pem().len())
        );
    }

    #[test]
    fn current_means_exactly_the_bundle_and_a_description() {
        let ca = RootCa::from_der(&[DER]).unwrap();
        let cm = |data: Value, annotations: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CONFIG_MAP, "namespace": "a", "annotations": annotations},
                "data": data,
            }))
            .unwrap()
        };
        let described = json!({ DESCRIPTION_ANNOTATION: DESCRIPTION });
        assert!(is_current(
            &cm(json!({CA_KEY: ca.pem()}), described.clone()),
            &ca
        ));
        // Upstream leaves a description someone rewrote.
        assert!(is_current(
            &cm(
                json!({CA_KEY: ca.pem()}),
                json!({DESCRIPTION_ANNOTATION: "mine", "x": "y"})
            ),
            &ca
        ));
        for (data, annotations) in [
            (json!({CA_KEY: "other"}), described.clone()),
            (json!({CA_KEY: ca.pem(), "extra": "x"}), described.clone()),
            (json!({}), described.clone()),
            (json!(null), described.clone()),
            (json!({CA_KEY: ca.pem()}), json!({})),
            (
                json!({CA_KEY: ca.pem()}),
                json!({DESCRIPTION_ANNOTATION: ""}),
            ),
        ] {
            assert!(
                !is_current(&cm(data.clone(), annotations.clone()), &ca),
                "{data} {annotations}"
            );
        }
    }

    #[test]
    fn only_the_terminating_refusal_is_moot() {
        let status = |code: u16, message: &str, causes: Value| -> kube::core::Status {
            serde_json::from_value(json!({
                "code": code, "message": message, "reason": "Forbidden",
                "details": {"causes": causes},
            }))
            .unwrap()
        };
        assert!(crate::util::api_error::namespace_terminating(&status(
            403,
            "configmaps \"kube-root-ca.crt\" is forbidden: unable to create new content in namespace a because it is being terminated",
            json!([]),
        )));
        assert!(crate::util::api_error::namespace_terminating(&status(
            403,
            "forbidden",
            json!([{"reason": "NamespaceTerminating", "message": "x"}]),
        )));
        assert!(!crate::util::api_error::namespace_terminating(&status(
            403,
            "User \"x\" cannot create resource \"configmaps\"",
            json!([]),
        )));
    }
}
