//! The agent's forward of the node plugin's CSI calls: every `/csi.v1.Node/*` and
//! `/csi.v1.Identity/*` call is passed to the plugin's socket as it came (the message's bytes,
//! its metadata) and the plugin's answer comes back as it went (bytes, status, details), so
//! the run judges the plugin, never the agent. Only a call tagged with the lease of the run
//! holding the agent is forwarded (the tag, [`super::LEASE_HEADER`], is taken off first). On
//! the way the agent only reads the paths of the calls that take one: a path outside its work
//! directory is refused before the plugin sees it, the run's directory
//! is made on the node when the node does not have it (as the CO's node half would), and
//! what the plugin did (staged, published, undone) goes to the lease's ledger.

use std::{
    convert::Infallible,
    path::{Component, Path, PathBuf},
    sync::Arc,
    task::{Context, Poll},
};

use prost::{Message, bytes::Buf};
use tonic::{
    Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::{Body, BoxFuture, StdError},
    server::NamedService,
    transport::Channel,
};

use super::{
    LEASE_HEADER,
    lease::{Lease, Work},
    node::NodeView,
};
use crate::proto::v1;

/// Messages as their bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        use prost::bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// The forward, shared by the Node and Identity services.
#[derive(Debug, Clone)]
pub struct Forward {
    plugin: Channel,
    lease: Lease,
    node: Arc<NodeView>,
    work_dir: PathBuf,
}

/// The paths one CSI call carries, and the work it does when it answers OK.
#[derive(Debug, Default)]
struct Seen {
    paths: Vec<String>,
    /// The directory (and, for NodeStageVolume, the staging path) the CO would have made.
    makes: Option<(PathBuf, Option<PathBuf>)>,
    done: Option<Work>,
    undone: Option<Work>,
    /// Markers on this target go with an unpublish.
    unpublished: Option<String>,
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes).map_err(|e| Status::invalid_argument(format!("csi-conform agent: the request does not decode: {e}")))
}

/// What a call carries, by its method.
fn seen(method: &str, bytes: &[u8]) -> Result<Seen, Status> {
    let parent = |p: &str| Path::new(p).parent().map(Path::to_path_buf);
    Ok(match method {
        "NodeStageVolume" => {
            let r: v1::NodeStageVolumeRequest = decode(bytes)?;
            let staging = PathBuf::from(&r.staging_target_path);
            Seen {
                makes: parent(&r.staging_target_path).map(|p| (p, Some(staging))),
                done: Some(Work::Staged { volume_id: r.volume_id, staging: r.staging_target_path.clone() }),
                paths: vec![r.staging_target_path],
                ..Seen::default()
            }
        }
        "NodeUnstageVolume" => {
            let r: v1::NodeUnstageVolumeRequest = decode(bytes)?;
            Seen {
                undone: Some(Work::Staged { volume_id: r.volume_id, staging: r.staging_target_path.clone() }),
                paths: vec![r.staging_target_path],
                ..Seen::default()
            }
        }
        "NodePublishVolume" => {
            let r: v1::NodePublishVolumeRequest = decode(bytes)?;
            Seen {
                makes: parent(&r.target_path).map(|p| (p, None)),
                done: Some(Work::Published { volume_id: r.volume_id, target: r.target_path.clone() }),
                paths: vec![r.target_path, r.staging_target_path],
                ..Seen::default()
            }
        }
        "NodeUnpublishVolume" => {
            let r: v1::NodeUnpublishVolumeRequest = decode(bytes)?;
            Seen {
                undone: Some(Work::Published { volume_id: r.volume_id, target: r.target_path.clone() }),
                unpublished: Some(r.target_path.clone()),
                paths: vec![r.target_path],
                ..Seen::default()
            }
        }
        "NodeExpandVolume" => {
            let r: v1::NodeExpandVolumeRequest = decode(bytes)?;
            Seen { paths: vec![r.volume_path, r.staging_target_path], ..Seen::default() }
        }
        "NodeGetVolumeStats" => {
            let r: v1::NodeGetVolumeStatsRequest = decode(bytes)?;
            Seen { paths: vec![r.volume_path, r.staging_target_path], ..Seen::default() }
        }
        _ => Seen::default(),
    })
}

/// Whether `path` is inside `dir` as written: absolute, without `..`.
pub fn inside(dir: &Path, path: &Path) -> bool {
    path.is_absolute() && !path.components().any(|c| c == Component::ParentDir) && path.starts_with(dir)
}

impl Forward {
    /// The forward to `plugin` (the node plugin's channel), keeping to `work_dir`.
    pub fn new(plugin: Channel, lease: Lease, node: Arc<NodeView>, work_dir: PathBuf) -> Forward {
        Forward { plugin, lease, node, work_dir }
    }

    /// Forwards one call in a task of its own, holding off any undo while it runs: when the
    /// run goes away mid-call, the plugin's answer is still awaited and recorded, so the lapse
    /// undoes exactly what the plugin did.
    async fn call(self, path: String, request: tonic::Request<Vec<u8>>) -> Result<tonic::Response<Vec<u8>>, Status> {
        let hold = self.lease.hold().await;
        let task = tokio::spawn(async move {
            let answer = self.forward(path, request).await;
            drop(hold);
            answer
        });
        task.await.unwrap_or_else(|e| Err(Status::internal(format!("csi-conform agent: the forward failed: {e}"))))
    }

    async fn forward(self, path: String, mut request: tonic::Request<Vec<u8>>) -> Result<tonic::Response<Vec<u8>>, Status> {
        let method = path.rsplit('/').next().unwrap_or_default().to_owned();
        let run_id = self.lease_of(&method, &mut request)?;
        let seen = seen(&method, request.get_ref())?;
        // An empty path goes to the plugin (whose answer to it is judged); any other must be
        // the run's.
        if let Some(outside) = seen.paths.iter().find(|p| !p.is_empty() && !inside(&self.work_dir, Path::new(p))) {
            return Err(Status::permission_denied(format!(
                "csi-conform agent: {method} names {outside}, which is outside the agent's work directory {} (the run's \
                 --work-dir must be inside it)",
                self.work_dir.display()
            )));
        }
        if let Some((dir, staging)) = &seen.makes {
            self.make_dirs(&run_id, dir, staging.as_deref()).await;
        }
        let mut client = tonic::client::Grpc::new(self.plugin.clone());
        client.ready().await.map_err(|e| Status::unavailable(format!("csi-conform agent: the node plugin: {e}")))?;
        let (metadata, _, body) = request.into_parts();
        let forwarded = tonic::Request::from_parts(metadata, Default::default(), body);
        let path = http::uri::PathAndQuery::try_from(path)
            .map_err(|e| Status::unimplemented(format!("csi-conform agent: {e}")))?;
        // Recorded before the plugin is asked: a run killed while the call is in flight drops
        // this future with it, and the mount the plugin makes must still be undone when the
        // lease lapses. A refusal takes back only what this call added.
        let fresh = seen.done.as_ref().is_some_and(|work| self.lease.record_for(&run_id, work.clone()));
        let answer = client.unary(forwarded, path, RawCodec).await;
        match (&answer, &seen.done) {
            (Ok(_), _) => {
                if let Some(work) = &seen.undone {
                    self.lease.forget(work);
                }
                if let Some(target) = &seen.unpublished {
                    self.lease.forget_markers(target);
                }
            }
            (Err(_), Some(work)) if fresh => self.lease.forget(work),
            (Err(_), _) => {}
        }
        answer
    }

    /// The lease a call carries ([`LEASE_HEADER`]), taken off the call (the plugin never sees
    /// it): only the run holding the agent now is forwarded. No lease: UNAUTHENTICATED;
    /// another run's, or one that lapsed: PERMISSION_DENIED. Both are said to be the agent's.
    fn lease_of(&self, method: &str, request: &mut tonic::Request<Vec<u8>>) -> Result<String, Status> {
        let carried = request.metadata_mut().remove(LEASE_HEADER);
        let Some(run_id) = carried.as_ref().and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()) else {
            return Err(Status::unauthenticated(format!(
                "csi-conform agent: {method} carries no lease ({LEASE_HEADER} metadata): the agent forwards only the \
                 calls of the run that holds it"
            )));
        };
        self.lease.check(Some(run_id)).map_err(|e| Status::permission_denied(format!("csi-conform agent: {method}: {e}")))?;
        Ok(run_id.to_owned())
    }

    /// Makes `dir` (and `staging` inside it) on the node when the node does not have `dir`:
    /// the run's directories live where the run runs, and this node may not share them.
    async fn make_dirs(&self, run_id: &str, dir: &Path, staging: Option<&Path>) {
        if !inside(&self.work_dir, dir) {
            return;
        }
        let inspector = self.node.inspector().await;
        let Some(local) = inspector.local_path(dir) else { return };
        if local.exists() {
            return;
        }
        let mut missing = Vec::new();
        let mut at = dir.to_path_buf();
        while inside(&self.work_dir, &at) && inspector.local_path(&at).is_some_and(|l| !l.exists()) {
            missing.push(at.clone());
            if !at.pop() {
                break;
            }
        }
        for d in missing.iter().rev().map(PathBuf::as_path).chain(staging) {
            if let Some(l) = inspector.local_path(d)
                && std::fs::create_dir(&l).is_ok()
            {
                let _ = self.lease.record_for(run_id, Work::Dir(d.to_owned()));
            }
        }
    }
}

/// One forwarded call, as tonic's server wants it.
struct Unary(Forward, String);

impl tonic::server::UnaryService<Vec<u8>> for Unary {
    type Response = Vec<u8>;
    type Future = BoxFuture<tonic::Response<Vec<u8>>, Status>;

    fn call(&mut self, request: tonic::Request<Vec<u8>>) -> Self::Future {
        Box::pin(self.0.clone().call(self.1.clone(), request))
    }
}

fn serve<B>(forward: Forward, request: http::Request<B>) -> BoxFuture<http::Response<tonic::body::Body>, Infallible>
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    let path = request.uri().path().to_owned();
    Box::pin(async move {
        let mut grpc = tonic::server::Grpc::new(RawCodec).apply_max_message_size_config(None, None);
        Ok(grpc.unary(Unary(forward, path), request).await)
    })
}

macro_rules! forwarded_service {
    ($name:ident, $service:literal) => {
        #[doc = concat!("The forward of `/", $service, "/*`.")]
        #[derive(Debug, Clone)]
        pub struct $name(pub Forward);

        impl NamedService for $name {
            const NAME: &'static str = $service;
        }

        impl<B> tower::Service<http::Request<B>> for $name
        where
            B: Body + Send + 'static,
            B::Error: Into<StdError> + Send + 'static,
        {
            type Response = http::Response<tonic::body::Body>;
            type Error = Infallible;
            type Future = BoxFuture<Self::Response, Infallible>;

            fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, request: http::Request<B>) -> Self::Future {
                serve(self.0.clone(), request)
            }
        }
    };
}

forwarded_service!(NodeForward, "csi.v1.Node");
forwarded_service!(IdentityForward, "csi.v1.Identity");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_work_dir_as_written_are_inside() {
        let dir = Path::new("/var/lib/csi-conform");
        assert!(inside(dir, Path::new("/var/lib/csi-conform/run/target")));
        assert!(!inside(dir, Path::new("/var/lib/csi-conform/../../etc")), "no way out through ..");
        assert!(!inside(dir, Path::new("/var/lib/csi-conformx/t")), "a sibling with the same prefix is outside");
        assert!(!inside(dir, Path::new("run/target")), "a relative path is nobody's");
        assert!(!inside(dir, Path::new("/etc")));
    }

    #[test]
    fn a_publish_carries_its_paths_and_its_work() {
        let r = v1::NodePublishVolumeRequest {
            volume_id: "v".into(),
            target_path: "/w/s/target".into(),
            staging_target_path: "/w/s/staging".into(),
            ..Default::default()
        };
        let s = seen("NodePublishVolume", &r.encode_to_vec()).unwrap();
        assert_eq!(s.paths, vec!["/w/s/target", "/w/s/staging"]);
        assert_eq!(s.done, Some(Work::Published { volume_id: "v".into(), target: "/w/s/target".into() }));
        assert_eq!(s.makes, Some((PathBuf::from("/w/s"), None)));
        let probe = seen("Probe", &[]).unwrap();
        assert!(probe.paths.is_empty() && probe.done.is_none());
        assert_eq!(seen("NodeStageVolume", &[0xff, 0xff]).unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
