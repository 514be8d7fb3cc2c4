//! A response body that keeps something alive until the body is sent or the client goes away:
//! an in-flight slot held for as long as a watch streams, an audit event completed when the
//! stream ends. Whatever must happen at the end is the guard's `Drop`.

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::{
    pin::Pin,
    task::{Context, Poll},
};

/// `body`, with `guard` dropped only when the body is.
pub(crate) fn guarded<G: Send + Unpin + 'static>(body: Body, guard: G) -> Body {
    Body::new(Guarded {
        body,
        _guard: guard,
    })
}

struct Guarded<G> {
    body: Body,
    _guard: G,
}

impl<G: Unpin> HttpBody for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
