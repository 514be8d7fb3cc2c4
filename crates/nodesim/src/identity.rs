//! Who the simulation acts as. A real kubelet holds a client certificate for
//! `system:node:NAME` in `system:nodes`, and upstream's Node authorizer and NodeRestriction
//! admission let it write only its own Node, its own Lease and the pods bound to it; so every
//! write of a simulated node goes through that node's own client. The shared watches (every
//! simulated node, every bound pod, every claim) are no one kubelet's: a kubelet may not list
//! claims at all, and its pod and node reads are meant for its own. They run as a dedicated
//! reader, [`READER`], which the control plane grants exactly those reads.

use kube::Client;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// The user the simulator's shared watches read as, and the name of the ClusterRole and
/// ClusterRoleBinding that grant it those reads.
pub const READER: &str = "rollwright:node-simulator";

/// The group every kubelet's certificate puts it in (upstream's `user.NodesGroup`).
pub const NODES_GROUP: &str = "system:nodes";

/// The prefix of a node's user name (upstream's `nodeidentifier` expects `system:node:NAME`).
pub const NODE_USER_PREFIX: &str = "system:node:";

/// The user the kubelet of node `name` authenticates as.
pub fn node_user(name: &str) -> authz::UserInfo {
    authz::UserInfo::new(
        format!("{NODE_USER_PREFIX}{name}"),
        &[NODES_GROUP, authz::AUTHENTICATED_GROUP],
    )
}

/// The user of the simulator's shared watches: no group but `system:authenticated`, so it can
/// do nothing beyond what its ClusterRole grants (and what every authenticated user may).
pub fn reader_user() -> authz::UserInfo {
    authz::UserInfo::new(READER, &[authz::AUTHENTICATED_GROUP])
}

/// Makes the client a node acts through, given the node's name.
pub type NodeClient = Arc<dyn Fn(&str) -> Client + Send + Sync>;

/// The clients of one simulation: the reader's, and each node's (made on first use and kept,
/// since a client is a tower stack with its own buffer task, not free to make per write).
#[derive(Clone)]
pub struct Identities {
    reader: Client,
    nodes: Nodes,
    users: Option<UserClient>,
}

/// Makes a client acting as a given user (in-process, where no credential crosses a socket).
pub type UserClient = Arc<dyn Fn(authz::UserInfo) -> Client + Send + Sync>;

#[derive(Clone)]
enum Nodes {
    /// Every node acts through the one client (a kubeconfig against a remote cluster).
    One(Client),
    /// Each node through its own.
    Own {
        make: NodeClient,
        made: Arc<Mutex<HashMap<String, Client>>>,
    },
}

impl Identities {
    /// The shared watches read with `reader`; node `NAME` writes with `node("NAME")`.
    pub fn new(reader: Client, node: NodeClient) -> Self {
        Self {
            reader,
            nodes: Nodes::Own {
                make: node,
                made: Arc::default(),
            },
            users: None,
        }
    }

    /// Everything through one client, as `rollwright nodes --kubeconfig` runs.
    pub fn single(client: Client) -> Self {
        Self {
            reader: client.clone(),
            nodes: Nodes::One(client),
            users: None,
        }
    }

    /// These identities, with clients acting as the user a pod's ServiceAccount token names:
    /// what a container that talks to the API (a certificate generator, see `crate::certgen`)
    /// acts through, its token authenticated by the API server first.
    pub fn with_users(mut self, make: UserClient) -> Self {
        self.users = Some(make);
        self
    }

    /// A client acting as `user`, where the simulation was given a way to make one.
    pub fn user(&self, user: authz::UserInfo) -> Option<Client> {
        self.users.as_ref().map(|make| make(user))
    }

    /// The client the shared watches read with.
    pub fn reader(&self) -> &Client {
        &self.reader
    }

    /// The client node `name` acts through.
    pub fn node(&self, name: &str) -> Client {
        match &self.nodes {
            Nodes::One(client) => client.clone(),
            Nodes::Own { make, made } => {
                let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(client) = made.get(name) {
                    return client.clone();
                }
                let client = make(name);
                made.insert(name.to_string(), client.clone());
                client
            }
        }
    }

    /// Drops a node's client (the node is gone); a later write for it makes a new one.
    pub(crate) fn forget(&self, name: &str) {
        if let Nodes::Own { made, .. } = &self.nodes {
            made.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A client that is never called: building one needs only a service.
    fn idle_client() -> Client {
        let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "not called",
            ))
        });
        Client::new(svc, "default")
    }

    #[test]
    fn a_node_user_is_what_upstreams_node_authorizer_expects() {
        let u = node_user("node-3");
        assert_eq!(u.username, "system:node:node-3");
        assert_eq!(u.groups, ["system:nodes", "system:authenticated"]);
        let r = reader_user();
        assert_eq!(r.username, "rollwright:node-simulator");
        assert_eq!(r.groups, ["system:authenticated"]);
    }

    #[tokio::test]
    async fn each_nodes_client_is_made_once_and_kept() {
        let made = Arc::new(AtomicUsize::new(0));
        let names = Arc::new(Mutex::new(Vec::new()));
        let (m, n) = (made.clone(), names.clone());
        let ids = Identities::new(
            idle_client(),
            Arc::new(move |name: &str| {
                m.fetch_add(1, Ordering::SeqCst);
                n.lock().unwrap().push(name.to_string());
                idle_client()
            }),
        );
        ids.node("node-0");
        ids.node("node-1");
        ids.node("node-0");
        assert_eq!(made.load(Ordering::SeqCst), 2);
        ids.forget("node-0");
        ids.node("node-0");
        assert_eq!(made.load(Ordering::SeqCst), 3);
        assert_eq!(*names.lock().unwrap(), ["node-0", "node-1", "node-0"]);
    }
}
