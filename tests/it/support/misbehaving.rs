//! Plugins that misbehave on the wire: a tower [`Layer`] for a tonic server that makes chosen
//! RPCs hang forever or answer raw bytes of our choosing (undecodable, enormous, or a valid
//! encoding of an impossible value), whatever the service behind it would have said. Used
//! through [`super::fake_plugin::FakeOptions::misbehave`].

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tonic::{
    Status,
    body::Body,
    server::{Grpc, UnaryService},
};

// Messages as raw bytes, both ways: the node agent's forward's own codec.
use csi_conform::agent::forward::RawCodec;

/// What a misbehaving RPC does instead of answering.
#[derive(Debug, Clone)]
pub enum Misbehaviour {
    /// Never answers (the connection stays open).
    Hang,
    /// Answers OK with exactly these bytes as the response message.
    Raw(Vec<u8>),
    /// Answers this error, whatever the request (a backend that cannot do the call at all).
    Refuse(tonic::Code, &'static str),
}

/// Misbehaviours by RPC method name (`CreateVolume`).
pub type Rules = Arc<BTreeMap<String, Misbehaviour>>;

/// Builds [`Rules`] from pairs.
pub fn rules(pairs: impl IntoIterator<Item = (&'static str, Misbehaviour)>) -> Rules {
    Arc::new(pairs.into_iter().map(|(rpc, m)| (rpc.to_owned(), m)).collect())
}

/// The layer: wraps a server's routes.
#[derive(Debug, Clone)]
pub struct Layer {
    rules: Rules,
}

impl Layer {
    /// A layer applying `rules` (none: every call passes through).
    pub fn new(rules: Rules) -> Self {
        Layer { rules }
    }
}

impl<S> tower::Layer<S> for Layer {
    type Service = Misbehave<S>;

    fn layer(&self, inner: S) -> Misbehave<S> {
        Misbehave { inner, rules: self.rules.clone() }
    }
}

/// The service [`Layer`] makes.
#[derive(Debug, Clone)]
pub struct Misbehave<S> {
    inner: S,
    rules: Rules,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S> tower::Service<http::Request<Body>> for Misbehave<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let rpc = request.uri().path().rsplit('/').next().unwrap_or_default().to_owned();
        match self.rules.get(&rpc).cloned() {
            None => Box::pin(self.inner.call(request)),
            Some(Misbehaviour::Hang) => Box::pin(std::future::pending()),
            Some(Misbehaviour::Raw(bytes)) => Box::pin(async move {
                Ok(Grpc::new(RawCodec).unary(Canned(bytes), request).await)
            }),
            Some(Misbehaviour::Refuse(code, message)) => Box::pin(async move {
                Ok(Grpc::new(RawCodec).unary(Refused(code, message), request).await)
            }),
        }
    }
}

/// Answers every request with the same bytes.
struct Canned(Vec<u8>);

impl UnaryService<Vec<u8>> for Canned {
    type Response = Vec<u8>;
    type Future = BoxFuture<Result<tonic::Response<Vec<u8>>, Status>>;

    fn call(&mut self, _: tonic::Request<Vec<u8>>) -> Self::Future {
        let bytes = self.0.clone();
        Box::pin(async move { Ok(tonic::Response::new(bytes)) })
    }
}

/// Answers every request with the same error.
struct Refused(tonic::Code, &'static str);

impl UnaryService<Vec<u8>> for Refused {
    type Response = Vec<u8>;
    type Future = BoxFuture<Result<tonic::Response<Vec<u8>>, Status>>;

    fn call(&mut self, _: tonic::Request<Vec<u8>>) -> Self::Future {
        let status = Status::new(self.0, self.1);
        Box::pin(async move { Err(status) })
    }
}

/// A fake plugin whose `rpc` does `misbehaviour` while everything else works.
pub async fn fake_where(rpc: &'static str, misbehaviour: Misbehaviour) -> super::fake_plugin::FakePlugin {
    use super::fake_plugin::{FakeOptions, FakePlugin};
    FakePlugin::start(FakeOptions { misbehave: rules([(rpc, misbehaviour)]), ..FakeOptions::default() }).await
}
