//! The chain of filters in front of the routes, built in one place, in upstream's handler-chain
//! order (`DefaultBuildHandlerChain`): request info, authentication, impersonation, audit,
//! priority and fairness (with the watch cap), authorization. Each caller of the server gets the chain by name, and a layer
//! a caller leaves out is left out here, with the reason.

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    middleware::{self, Next},
    response::Response,
};

use super::{authentication, authorization, impersonation, request_info};
use crate::{context::Identity, inflight, state::ApiServer};

/// Who is calling, which decides the layers a request goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// A client over TLS: every layer.
    Remote,
    /// A component in this process that says who it is on each request ([`act_as`]): not
    /// authenticated (it holds no credentials to check: it is this process), but classified and
    /// queued by priority and fairness under its identity, as upstream's controller manager,
    /// scheduler and kubelets are as clients: the controllers' ServiceAccounts in `kube-system`
    /// at `workload-high`, the scheduler at `workload-high`, the nodes at `system` and
    /// `node-high`. Their watches are not capped (the cap protects the server from clients).
    Component,
    /// The server itself (upstream's loopback client, in `system:masters`): neither
    /// authenticated, impersonating, limited nor authorized, since `system:masters` is allowed
    /// everything before any authorizer is asked and its FlowSchema (`exempt`) is not limited.
    Loopback,
}

impl ApiServer {
    /// The routes behind the whole chain, for clients over TLS.
    pub fn router(&self) -> Router {
        self.chain(Caller::Remote)
    }

    /// The routes for a component in this process acting as `user` (a controller's
    /// ServiceAccount, the scheduler, a node): authorized as that user, as if it had presented
    /// its credentials over TLS, without the cost of crossing a socket.
    pub fn in_process_router_as(&self, user: authz::UserInfo) -> Router {
        let user = Arc::new(user);
        self.authorizing_router()
            .layer(middleware::from_fn(move |mut req: Request, next: Next| {
                act_as(&mut req, user.clone());
                next.run(req)
            }))
    }

    /// The routes for components in this process that say who they are with [`act_as`] on each
    /// request: one router for any number of identities (a cluster's thousands of simulated
    /// nodes).
    pub fn authorizing_router(&self) -> Router {
        self.chain(Caller::Component)
    }

    /// The routes for the server's own requests, as the server (`system:apiserver` in
    /// `system:masters`).
    pub fn in_process_router(&self) -> Router {
        self.chain(Caller::Loopback).layer(middleware::from_fn(
            |mut req: Request, next: Next| async move {
                req.extensions_mut().insert(Identity {
                    user: crate::context::loopback(),
                    impersonator: None,
                });
                next.run(req).await
            },
        ))
    }

    /// The routes behind the layers `caller` goes through, innermost first.
    fn chain(&self, caller: Caller) -> Router {
        let mut router = self.routes();
        if caller == Caller::Component {
            // The same steps as a remote request's from request info on, in one layer: every
            // layer boxes the rest of the stack and a future per request, and a component's
            // requests (a kubelet's status reports, a controller's pod writes) are most of a
            // rollout's, where four layers took 3% of its CPU (`bench phases`, BENCHMARKS.md).
            return router.layer(middleware::from_fn_with_state(self.clone(), component));
        }
        if caller != Caller::Loopback {
            router = router.layer(middleware::from_fn_with_state(
                self.clone(),
                authorization::authorize,
            ));
        }
        if caller == Caller::Remote {
            router = router.layer(middleware::from_fn_with_state(
                (self.in_flight.clone(), self.metrics.clone()),
                inflight::limit,
            ));
        }
        if caller != Caller::Loopback {
            router = router.layer(middleware::from_fn_with_state(
                self.clone(),
                crate::flowcontrol::filter,
            ));
        }
        // Audit sees who acts and who impersonates (upstream audits before impersonation and
        // records both the same way). The server's own requests are not audited, nor the
        // components' in this process: with an audit log, every controller write would be one
        // more record than upstream's controller manager, run as a separate client, makes
        // through its own connection, which is audited.
        if caller == Caller::Remote {
            router = router.layer(middleware::from_fn_with_state(
                self.clone(),
                crate::audit::layer,
            ));
        }
        if caller != Caller::Loopback {
            router = router.layer(middleware::from_fn_with_state(
                self.clone(),
                impersonation::impersonate,
            ));
        }
        if caller == Caller::Remote {
            router = router.layer(middleware::from_fn_with_state(
                self.clone(),
                authentication::authenticate,
            ));
        }
        router.layer(middleware::from_fn(request_info::parse))
    }
}

/// A component's chain as one layer, in the order [`ApiServer::chain`] layers a remote
/// request's: request info, impersonation, priority and fairness, authorization.
async fn component(State(s): State<ApiServer>, mut req: Request, next: Next) -> Response {
    request_info::insert(&mut req);
    if let Err(refused) = impersonation::apply(&s, &mut req) {
        return refused;
    }
    crate::flowcontrol::run(&s, req, |req| async {
        match authorization::check(&s, &req) {
            Ok(()) => next.run(req).await,
            Err(refused) => refused,
        }
    })
    .await
}

/// Marks an in-process request as made by `user`, for [`ApiServer::authorizing_router`].
pub fn act_as<B>(req: &mut http::Request<B>, user: Arc<authz::UserInfo>) {
    req.extensions_mut().insert(Identity {
        user,
        impersonator: None,
    });
}
