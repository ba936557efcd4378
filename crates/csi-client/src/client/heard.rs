//! Whether the plugin answered a call at all: a channel wrapper that notes an HTTP response.
//! A gRPC status that comes back without one was made by the client library or the transport
//! (a connection lost, reset or refused mid-call, tonic's own UNAVAILABLE or CANCELLED), never
//! sent by the plugin, whatever its code and message say.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use tonic::{body::Body, transport::Channel};

/// A channel for one call that records whether any response arrived.
#[derive(Debug, Clone)]
pub(crate) struct Heard {
    channel: Channel,
    answered: Arc<AtomicBool>,
}

impl Heard {
    /// Wraps `channel`; [`Heard::flag`] reads whether a response came.
    pub(crate) fn new(channel: Channel) -> Self {
        Heard { channel, answered: Arc::new(AtomicBool::new(false)) }
    }

    /// The flag, set once the plugin's response (headers, or a trailers-only status) arrived.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.answered.clone()
    }
}

impl tower::Service<http::Request<Body>> for Heard {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower::Service::poll_ready(&mut self.channel, cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let answered = self.answered.clone();
        let response = tower::Service::call(&mut self.channel, request);
        Box::pin(async move {
            let response = response.await;
            if response.is_ok() {
                answered.store(true, Ordering::SeqCst);
            }
            response
        })
    }
}

/// Whether `flag` says the plugin answered.
pub(crate) fn answered(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst)
}
