//! Why a reconcile failed, for the controllers that fail in one way only: an API call.

/// A failed reconcile of a controller whose only failure is an API call (it is retried with
/// back-off).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// An API call failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
}
