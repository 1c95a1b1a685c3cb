//! Whether a request's body was read to its end. A request answered before its body was read
//! (refused by its key, or a 404 for another store's tool route) leaves the body's bytes on the
//! connection, which hyper then closes after the answer; the answer says `Connection: close`, so
//! that the client does not send its next request on a connection about to close (the anthropic
//! SDK's client did, and got "Server disconnected without sending a response").

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// A request body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || this.inner.is_end_stream() {
            this.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The request with its body watched, and the flag that says it was read.
pub fn watch(request: Request) -> (Request, Arc<AtomicBool>) {
    let (parts, body) = request.into_parts();
    let read = Arc::new(AtomicBool::new(http_body::Body::is_end_stream(&body)));
    let watched = Watched {
        inner: body,
        read: Arc::clone(&read),
    };
    (Request::from_parts(parts, Body::new(watched)), read)
}

/// Marks `response` `Connection: close` when the request's body was not read to its end.
pub fn close_if_unread(response: &mut Response, read: &AtomicBool) {
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}
