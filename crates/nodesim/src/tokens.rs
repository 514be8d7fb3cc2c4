//! Projected ServiceAccount tokens, as the kubelet's token manager
//! (`pkg/kubelet/token/token_manager.go`) keeps them: when a pod starts, every `serviceAccountToken`
//! source of its projected volumes is requested from `serviceaccounts/NAME/token` (its audience,
//! its `expirationSeconds`, bound to the pod), and each token is requested again once 80% of its
//! lifetime has passed (or a day, whichever is sooner), until the pod is gone.
//!
//! The simulated kubelet has no files to write them to: it keeps them in [`Tokens`], which a
//! caller (a test) reads through [`crate::Stats::tokens`].

use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::{Pod, ServiceAccount},
};
use kube::{Api, Client, api::PostParams};
use std::{
    cmp::Reverse,
    collections::{BTreeMap, BinaryHeap, HashMap},
    time::Duration,
};
use tokio::{sync::mpsc, time::Instant};

/// A projected volume's `serviceAccountToken` source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSource {
    /// The volume's name.
    pub volume: String,
    /// The file the token goes to, within the volume.
    pub path: String,
    /// The audience asked for (`None`: the API server's).
    pub audience: Option<String>,
    /// The lifetime asked for (the API's default, an hour, when unset).
    pub expiration_seconds: i64,
}

impl TokenSource {
    /// `volume/path`, the key a token is held under.
    pub fn key(&self) -> String {
        format!("{}/{}", self.volume, self.path)
    }
}

/// The token sources of `pod`'s projected volumes.
pub fn sources(pod: &Pod) -> Vec<TokenSource> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref().map(|p| (v, p)))
        .flat_map(|(v, p)| {
            p.sources
                .iter()
                .flatten()
                .filter_map(|s| s.service_account_token.as_ref())
                .map(|t| TokenSource {
                    volume: v.name.clone(),
                    path: t.path.clone(),
                    audience: t.audience.clone().filter(|a| !a.is_empty()),
                    expiration_seconds: t.expiration_seconds.unwrap_or(3600),
                })
        })
        .collect()
}

/// The tokens the simulated kubelets hold, by pod uid and then `volume/path`; it can be waited on.
#[derive(Debug)]
pub struct Tokens(tokio::sync::watch::Sender<HashMap<String, BTreeMap<String, String>>>);

impl Default for Tokens {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(HashMap::new()))
    }
}

impl Tokens {
    /// The tokens held for the pod `uid`.
    pub fn of(&self, uid: &str) -> BTreeMap<String, String> {
        self.0.borrow().get(uid).cloned().unwrap_or_default()
    }

    /// Waits until the tokens held for the pod `uid` satisfy `pred`; returns them.
    pub async fn wait_for(
        &self,
        uid: &str,
        pred: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> BTreeMap<String, String> {
        let mut rx = self.0.subscribe();
        let empty = BTreeMap::new();
        let held = rx
            .wait_for(|m| pred(m.get(uid).unwrap_or(&empty)))
            .await
            .map(|m| m.get(uid).cloned().unwrap_or_default());
        // The sender lives in this struct, so the channel cannot close while we borrow it.
        held.unwrap_or_default()
    }

    fn put(&self, uid: &str, key: String, token: String) {
        self.0.send_modify(|m| {
            m.entry(uid.to_string()).or_default().insert(key, token);
        });
    }

    fn forget(&self, uid: &str) {
        self.0.send_if_modified(|m| m.remove(uid).is_some());
    }
}

/// What the engine tells the token manager.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A pod started: get its tokens.
    Start {
        /// The node the pod runs on, which asks for the tokens (upstream's Node authorizer
        /// lets a node request tokens only for its own pods' ServiceAccounts).
        node: String,
        namespace: String,
        name: String,
        uid: String,
        account: String,
        sources: Vec<TokenSource>,
    },
    /// A pod is gone: drop its tokens.
    Stop { uid: String },
}

/// One token the manager keeps fresh.
#[derive(Clone)]
struct Held {
    node: String,
    namespace: String,
    name: String,
    uid: String,
    account: String,
    source: TokenSource,
    /// When to ask for it (again); `None` while a request for it is out.
    refresh_at: Option<Instant>,
}

/// After a failed request, when to try again.
const RETRY: Duration = Duration::from_secs(10);
/// The longest a token is kept without asking again (the kubelet's `maxTTL`).
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Starts the token manager; it stops when the returned sender is dropped.
pub(crate) fn start(
    identities: crate::identity::Identities,
    tokens: std::sync::Arc<crate::Stats>,
) -> mpsc::UnboundedSender<Msg> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(run(identities, tokens, rx));
    tx
}

/// One pod's tokens, and the deadline its entry in the queue of [`run`] is for (older entries
/// for the pod are stale).
struct PodTokens {
    held: Vec<Held>,
    queued: Instant,
}

/// At most this many token requests are in flight at once. Each kubelet mounts its pods'
/// volumes in their own workers, so a node's pods get their tokens side by side, not one after
/// another: one request at a time for every node of the process made the requests a server
/// could answer in a phase a matter of its latency (in issue 42's side-by-side run, 669 of 2,000
/// new pods got their token from `rollwright up`, 108 from upstream's slower RS256 signer). The
/// bound keeps 100,000 starting pods from opening as many requests.
const MAX_IN_FLIGHT: usize = 64;

/// A token request's answer, back to [`run`].
struct Answer {
    uid: String,
    key: String,
    got: Result<(String, Duration), kube::Error>,
}

/// Keeps every started pod's tokens fresh. Pods are kept by uid and their deadlines in a heap, so
/// a pod starting or stopping costs O(log n): with 65,000 daemon pods, scanning every token held
/// per message made each wave of a rollout quadratic. Requests run as tasks of their own (at
/// most [`MAX_IN_FLIGHT`]); a token asked for is not asked for again until its answer is in.
async fn run(
    identities: crate::identity::Identities,
    stats: std::sync::Arc<crate::Stats>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut pods: HashMap<String, PodTokens> = HashMap::new();
    let mut due: BinaryHeap<Reverse<(Instant, String)>> = BinaryHeap::new();
    let (answers_tx, mut answers) = mpsc::unbounded_channel::<Answer>();
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    loop {
        let next = due.peek().map(|Reverse((at, _))| *at);
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Start { node, namespace, name, uid, account, sources }) => {
                    let now = Instant::now();
                    let held = sources
                        .into_iter()
                        .map(|source| Held {
                            node: node.clone(),
                            namespace: namespace.clone(),
                            name: name.clone(),
                            uid: uid.clone(),
                            account: account.clone(),
                            source,
                            refresh_at: Some(now),
                        })
                        .collect();
                    pods.insert(uid.clone(), PodTokens { held, queued: now });
                    due.push(Reverse((now, uid)));
                }
                Some(Msg::Stop { uid }) => {
                    pods.remove(&uid);
                    stats.tokens.forget(&uid);
                }
                None => return,
            },
            Some(answer) = answers.recv() => {
                // A pod stopped while its request was out: the answer is dropped with it.
                let Some(pod) = pods.get_mut(&answer.uid) else { continue };
                let Some(h) = pod.held.iter_mut().find(|h| h.source.key() == answer.key) else {
                    continue;
                };
                let at = match answer.got {
                    Ok((token, lifetime)) => {
                        stats.tokens.put(&answer.uid, answer.key, token);
                        Instant::now() + refresh_after(lifetime)
                    }
                    Err(e) => {
                        tracing::debug!(pod = %format!("{}/{}", h.namespace, h.name), error = %e, "token request failed; retrying");
                        Instant::now() + RETRY
                    }
                };
                h.refresh_at = Some(at);
                if let Some(next) = pod.held.iter().filter_map(|h| h.refresh_at).min() {
                    // Entries queued before are stale from now on (`queued` no longer matches).
                    pod.queued = next;
                    due.push(Reverse((next, answer.uid)));
                }
            },
            _ = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
        let now = Instant::now();
        while due.peek().is_some_and(|Reverse((at, _))| *at <= now) {
            let Some(Reverse((at, uid))) = due.pop() else {
                break;
            };
            let Some(pod) = pods.get_mut(&uid).filter(|p| p.queued == at) else {
                continue;
            };
            for h in pod
                .held
                .iter_mut()
                .filter(|h| h.refresh_at.is_some_and(|r| r <= now))
            {
                // Out: no deadline until the answer sets the next one.
                h.refresh_at = None;
                let client = identities.node(&h.node);
                let held = h.clone();
                let (answers, permits) = (answers_tx.clone(), permits.clone());
                tokio::spawn(async move {
                    let Ok(_permit) = permits.acquire_owned().await else {
                        return;
                    };
                    let got = request(&client, &held).await;
                    let _ = answers.send(Answer {
                        key: held.source.key(),
                        uid: held.uid,
                        got,
                    });
                });
            }
            if let Some(next) = pod.held.iter().filter_map(|h| h.refresh_at).min() {
                pod.queued = next;
                due.push(Reverse((next, uid)));
            }
        }
    }
}

/// When a token of `lifetime` is asked for again: at 80% of it, or after a day.
fn refresh_after(lifetime: Duration) -> Duration {
    (lifetime * 4 / 5).min(MAX_TTL)
}

/// Asks for one token; returns it and its lifetime.
async fn request(client: &Client, h: &Held) -> Result<(String, Duration), kube::Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &h.namespace);
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: h.source.audience.clone().into_iter().collect(),
            expiration_seconds: Some(h.source.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(h.name.clone()),
                uid: Some(h.uid.clone()),
            }),
        },
        ..Default::default()
    };
    let out = api
        .create_token_request(&h.account, &PostParams::default(), &req)
        .await?;
    let token = out.status.map(|s| s.token).unwrap_or_default();
    let lifetime = out
        .spec
        .expiration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(3600));
    Ok((token, lifetime))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn projected_token_sources_are_found_with_their_defaults() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [], "volumes": [
                {"name": "kube-api-access-x", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt"}},
                ]}},
                {"name": "vault", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "t", "audience": "vault"}},
                ]}},
                {"name": "data", "emptyDir": {}},
            ]}
        }))
        .unwrap();
        assert_eq!(
            sources(&pod),
            vec![
                TokenSource {
                    volume: "kube-api-access-x".into(),
                    path: "token".into(),
                    audience: None,
                    expiration_seconds: 3607,
                },
                TokenSource {
                    volume: "vault".into(),
                    path: "t".into(),
                    audience: Some("vault".into()),
                    expiration_seconds: 3600,
                },
            ]
        );
    }

    #[test]
    fn tokens_are_refreshed_at_four_fifths_of_their_life_or_daily() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(refresh_after(Duration::from_secs(10 * 86400)), MAX_TTL);
    }

    /// A token answered at once for any ServiceAccount but `stuck`, whose requests never end.
    fn server() -> Client {
        let svc = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
            if req.uri().path().contains("/serviceaccounts/stuck/") {
                std::future::pending::<()>().await;
            }
            let answer = json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"audiences": [], "expirationSeconds": 3600},
                "status": {"token": "t", "expirationTimestamp": "2026-01-01T00:00:00Z"},
            });
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .status(201)
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .unwrap(),
            )
        });
        Client::new(svc, "default")
    }

    fn started(name: &str, account: &str) -> Msg {
        Msg::Start {
            node: "node-0".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            account: account.into(),
            sources: vec![TokenSource {
                volume: "kube-api-access".into(),
                path: "token".into(),
                audience: None,
                expiration_seconds: 3600,
            }],
        }
    }

    /// Each kubelet mounts its pods' volumes side by side: one pod's token request that takes
    /// long holds back no other pod's. One request at a time, every pod behind it waited.
    #[tokio::test]
    async fn a_slow_token_request_holds_back_no_other_pods() {
        let stats = std::sync::Arc::new(crate::Stats::default());
        let manager = start(crate::identity::Identities::single(server()), stats.clone());
        manager.send(started("first", "stuck")).unwrap();
        manager.send(started("second", "default")).unwrap();
        let held = tokio::time::timeout(
            Duration::from_secs(10),
            stats
                .tokens
                .wait_for("uid-second", |t| t.contains_key("kube-api-access/token")),
        )
        .await
        .expect("the second pod got its token while the first pod's request was out");
        assert_eq!(held["kube-api-access/token"], "t");
        assert!(stats.tokens.of("uid-first").is_empty());
    }
}
