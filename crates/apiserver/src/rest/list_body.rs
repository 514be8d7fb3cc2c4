//! A LIST response's body, written as the client reads it.
//!
//! A list once built its whole body (every item's JSON copied into one buffer) before the first
//! byte went out, so each list in flight held a copy of the collection: 400 concurrent lists of
//! 5.8 MB took the server from 177 MiB to 1.77 GiB, and 450 of 100 MB got it killed (issue 36).
//! Here a list holds the cache's entries it lists (shared with the cache, one pointer each) and
//! renders the next chunk only when the connection asks for it, so what a list adds to memory is
//! a chunk or so however large the collection, and a slow reader slows its own list down
//! (hyper polls a body only when its write buffer has room) instead of making the server buffer.
//!
//! The bytes are the same as the whole body's: the head (`kind`, `apiVersion`, `metadata`, up to
//! the opening `[`), the items separated by commas, and the closing `]}`.

use crate::cache::Entry;
use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use std::{
    convert::Infallible,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

/// About how many bytes one frame of a list body carries (one item more at most): large enough
/// that a frame's overhead through the response pipeline is small beside it, small enough that
/// thousands of lists in flight hold little.
pub(crate) const CHUNK: usize = 64 * 1024;

/// A list whose items are rendered on the way out (a converted version, metadata only, Table
/// rows) is built whole, as before, when its stored objects come to at most this many bytes: its
/// length is then known, so it carries a `Content-Length` and an audit policy at
/// `RequestResponse` records it, as it does every whole body; larger ones are streamed.
pub(crate) const BUILD_WHOLE_UP_TO: usize = 256 * 1024;

/// Writes one item of a list as the response serves it.
pub(crate) type RenderItem = Box<dyn Fn(&Entry, &mut Vec<u8>) + Send + Sync>;

/// How the items of a list are written.
pub(crate) enum Items {
    /// Each entry's stored JSON as it is: the body's length is known before it is written.
    Stored,
    /// Each entry rendered by the function.
    Rendered(RenderItem),
}

/// The parts of a list response body.
pub(crate) struct ListBody {
    head: Option<Vec<u8>>,
    entries: Vec<Arc<Entry>>,
    next: usize,
    items: Items,
    tail: &'static [u8],
    /// Bytes not yet written, when known.
    left: Option<u64>,
    done: bool,
    buffered: Gauge,
}

impl ListBody {
    /// The body `head`, the entries as `items` writes them, then `tail`; every chunk it renders
    /// is counted in `buffered` until it is dropped.
    pub(crate) fn new(
        head: String,
        entries: Vec<Arc<Entry>>,
        items: Items,
        tail: &'static [u8],
        buffered: Gauge,
    ) -> Self {
        let left = match items {
            Items::Stored => Some(
                (head.len()
                    + entries.iter().map(|e| e.json.len()).sum::<usize>()
                    + entries.len().saturating_sub(1)
                    + tail.len()) as u64,
            ),
            Items::Rendered(_) => None,
        };
        Self {
            head: Some(head.into_bytes()),
            entries,
            next: 0,
            items,
            tail,
            left,
            done: false,
            buffered,
        }
    }

    /// The response body: streamed, unless it is small and its length is known only once it is
    /// rendered (see [`BUILD_WHOLE_UP_TO`]).
    pub(crate) fn into_body(mut self) -> Body {
        let small = self.entries.iter().map(|e| e.json.len()).sum::<usize>() <= BUILD_WHOLE_UP_TO;
        if matches!(self.items, Items::Rendered(_)) && small {
            return Body::from(self.chunk(usize::MAX).unwrap_or_default());
        }
        Body::new(self)
    }

    /// The next chunk of about `size` bytes, or `None` when the body is complete.
    fn chunk(&mut self, size: usize) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut buf = match self.head.take() {
            // The head alone goes out first, so that a client sees the list's metadata at once.
            Some(head) if size != usize::MAX => return Some(self.written(head)),
            Some(head) => head,
            None => Vec::with_capacity(size.min(CHUNK)),
        };
        while self.next < self.entries.len() && buf.len() < size {
            if self.next > 0 {
                buf.push(b',');
            }
            let e = &self.entries[self.next];
            match &self.items {
                Items::Stored => buf.extend_from_slice(&e.json),
                Items::Rendered(render) => render(e, &mut buf),
            }
            self.next += 1;
        }
        if self.next == self.entries.len() && buf.len() < size {
            buf.extend_from_slice(self.tail);
            self.done = true;
            // The entries are let go as soon as the last is written, not when hyper drops the
            // body, so that a deleted object's memory is not kept by a finished list.
            self.entries = Vec::new();
        }
        Some(self.written(buf))
    }

    /// `buf` handed out: no longer left to write, counted until it is dropped.
    fn written(&mut self, buf: Vec<u8>) -> Bytes {
        if let Some(left) = &mut self.left {
            *left = left.saturating_sub(buf.len() as u64);
        }
        counted(buf, self.buffered.clone())
    }
}

/// `buf` as `Bytes` counted in `gauge` until the last reference to it is dropped.
fn counted(buf: Vec<u8>, gauge: Gauge) -> Bytes {
    gauge.inc_by(buf.len() as i64);
    Bytes::from_owner(Counted { buf, gauge })
}

struct Counted {
    buf: Vec<u8>,
    gauge: Gauge,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.gauge.dec_by(self.buf.len() as i64);
    }
}

impl HttpBody for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.chunk(CHUNK).map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        match self.left {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
