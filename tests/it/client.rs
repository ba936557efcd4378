//! Connecting to plugins that are missing, dead, not gRPC, not CSI, never ready, unhealthy or
//! silent: each gives its own clear error, within the configured wait.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use csi_conform::{
    client::{ClientOptions, ConnectError, Connection, Endpoint},
    proto::v1::{self, identity_server},
};
use tokio::{io::AsyncReadExt, io::AsyncWriteExt, net::UnixListener};
use tonic::{Request, Response, Status};

fn options(connect: Duration) -> ClientOptions {
    ClientOptions {
        connect_timeout: connect,
        rpc_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    }
}

/// A bound far above any wait these tests configure: it only turns a hang into a failure.
const HANG: Duration = Duration::from_secs(60);

async fn connect_err(path: &Path, connect: Duration) -> ConnectError {
    tokio::time::timeout(HANG, Connection::connect(Endpoint::Unix(path.to_owned()), options(connect)))
        .await
        .expect("connecting hangs")
        .expect_err("connecting must fail")
}

fn sock(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[tokio::test]
async fn a_missing_socket_is_named_with_the_time_waited() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "absent.sock");
    let err = connect_err(&path, Duration::from_millis(300)).await;
    let ConnectError::NoSocket { waited, .. } = &err else { panic!("{err:?}") };
    // What it reports having waited: at least the configured wait (never less; a slow
    // machine only makes it more).
    assert!(*waited >= Duration::from_millis(300), "{waited:?}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("no socket at {}", path.display())), "{text}");
    assert!(text.contains(&format!("(waited {}, --connect-timeout)", csi_conform::client::human_duration(*waited))), "{text}");
}

#[tokio::test]
async fn a_socket_that_appears_late_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "late.sock");
    // The connection is polled by a wrapper that counts its pending polls: the second means it
    // has looked for the socket at least once and found none, and is waiting.
    let (polls, mut pending) = tokio::sync::watch::channel(0u32);
    let mut connect = Box::pin(Connection::connect(Endpoint::Unix(path.clone()), options(HANG)));
    let client = tokio::spawn(std::future::poll_fn(move |cx| {
        let poll = connect.as_mut().poll(cx);
        if poll.is_pending() {
            polls.send_modify(|n| *n += 1);
        }
        poll
    }));
    tokio::time::timeout(HANG, pending.wait_for(|n| *n >= 2)).await.expect("the client polls").unwrap();
    assert!(!client.is_finished(), "it waits for the socket");
    let server = tokio::spawn(async move { serve_identity(&path, Identity::Ready(None)).await });
    let conn = tokio::time::timeout(HANG, client).await.expect("connecting hangs").unwrap();
    assert!(conn.is_ok(), "{:?}", conn.err());
    server.abort();
}

#[tokio::test]
async fn a_regular_file_is_not_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "file.sock");
    std::fs::write(&path, b"").unwrap();
    let err = connect_err(&path, Duration::from_secs(5)).await;
    assert_eq!(
        err.to_string(),
        format!("{} exists but is not a unix socket (a regular file)", path.display())
    );
}

#[tokio::test]
async fn a_dead_socket_says_nobody_listens() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let err = connect_err(&path, Duration::from_millis(400)).await;
    assert!(matches!(err, ConnectError::Refused { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("nobody is listening at unix://"), "{text}");
    assert!(text.contains("crashed leaves its socket file behind"), "{text}");
}

#[tokio::test]
async fn a_server_that_is_not_grpc_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "http.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    let err = connect_err(&path, Duration::from_secs(5)).await;
    assert!(matches!(err, ConnectError::NotGrpc { .. }), "{err:?}");
    assert!(err.to_string().contains("does not speak gRPC"), "{err}");
    server.abort();
}

#[tokio::test]
async fn a_silent_server_is_reported_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "silent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let err = connect_err(&path, Duration::from_millis(500)).await;
    assert!(matches!(err, ConnectError::Silent { .. }), "{err:?}");
    assert!(err.to_string().contains("did not answer Probe within"), "{err}");
    server.abort();
}

/// Connects with `connect_noting`, collecting what it says while it waits.
async fn connect_noted(path: &Path, connect: Duration) -> (Result<Connection, ConnectError>, Vec<String>) {
    let notes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = notes.clone();
    let result = Connection::connect_noting(Endpoint::Unix(path.to_owned()), options(connect), move |n| seen.lock().unwrap().push(n)).await;
    let notes = notes.lock().unwrap().clone();
    (result, notes)
}

/// A wait longer than a second says what it waits for, and names the flag that bounds it;
/// so does the error at its end.
#[tokio::test]
async fn a_long_wait_says_what_it_waits_for_and_which_flag_bounds_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "absent.sock");
    let (err, notes) = connect_noted(&path, Duration::from_millis(1500)).await;
    let err = err.expect_err("no socket");
    assert_eq!(
        notes,
        [format!("waiting for the socket {} to appear (up to 1.5s, --connect-timeout)", path.display())]
    );
    assert!(err.to_string().contains("(waited 1.5s, --connect-timeout)"), "{err}");

    // A plugin that answers at once is connected in silence.
    let ready = sock(&dir, "ready.sock");
    let server_path = ready.clone();
    let server = tokio::spawn(async move { serve_identity(&server_path, Identity::Ready(None)).await });
    let (conn, notes) = connect_noted(&ready, Duration::from_secs(5)).await;
    conn.expect("connects");
    assert!(notes.is_empty(), "{notes:?}");
    server.abort();
}

/// A plugin that answers Probe, but slower than --rpc-timeout, is told as slow, with the flag
/// to raise, not as a silent or hung server.
#[tokio::test]
async fn a_probe_slower_than_the_rpc_timeout_is_told_as_that() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "slow.sock");
    let server_path = path.clone();
    let server = tokio::spawn(async move { serve_identity(&server_path, Identity::Slow(Duration::from_millis(700))).await });
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(5),
        rpc_timeout: Duration::from_millis(200),
        ..ClientOptions::default()
    };
    let err = Connection::connect(Endpoint::Unix(path), options).await.expect_err("too slow");
    assert!(matches!(err, ConnectError::SlowProbe { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("answered Probe after") && text.contains("slower than --rpc-timeout (200ms)"), "{text}");
    assert!(!text.contains("hung"), "{text}");
    server.abort();
}

#[tokio::test]
async fn a_grpc_server_without_the_identity_service_is_not_csi() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "grpc.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::default())
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await
    });
    let err = connect_err(&path, Duration::from_secs(5)).await;
    assert!(matches!(err, ConnectError::NotCsi { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a CSI plugin: Probe answered UNIMPLEMENTED"), "{err}");
    server.abort();
}

#[tokio::test]
async fn a_plugin_that_never_becomes_ready_says_how_long_it_waited() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "notready.sock");
    let server_path = path.clone();
    let server = tokio::spawn(async move { serve_identity(&server_path, Identity::Ready(Some(false))).await });
    // Listening before the wait starts, and a wait long enough for a second probe on a loaded
    // 2-core machine: this test is about the answer and the retries, not the wait for the
    // socket (it failed under load with 700 ms).
    let started = std::time::Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < HANG, "the server never made its socket");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let err = connect_err(&path, Duration::from_secs(2)).await;
    let ConnectError::NeverReady { probes, waited, .. } = &err else { panic!("{err:?}") };
    assert!(*probes >= 2, "{probes}");
    assert!(*waited >= Duration::from_secs(2), "{waited:?}");
    assert!(err.to_string().contains("never became ready: Probe answered ready=false"), "{err}");
    server.abort();
}

#[tokio::test]
async fn a_plugin_whose_probe_fails_is_reported_unhealthy_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "sick.sock");
    let server_path = path.clone();
    let server = tokio::spawn(async move { serve_identity(&server_path, Identity::Failing).await });
    // The server is listening before the connect timeout starts: on a loaded machine the
    // spawned server may take longer than the timeout to bind, and this test is about the
    // answer, not the wait for the socket (a_missing_socket_is_named_with_the_time_waited).
    let started = std::time::Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < HANG, "the server never made its socket");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let err = connect_err(&path, Duration::from_secs(1)).await;
    assert!(matches!(err, ConnectError::Unhealthy { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("reports itself unhealthy: Probe failed with FAILED_PRECONDITION: backend offline"), "{text}");
    server.abort();
}

#[tokio::test]
async fn a_ready_plugin_connects_and_rpcs_carry_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path = sock(&dir, "ok.sock");
    let server_path = path.clone();
    let server = tokio::spawn(async move { serve_identity(&server_path, Identity::Ready(Some(true))).await });
    let conn = Connection::connect(
        Endpoint::Unix(path),
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            rpc_timeout: Duration::from_millis(300),
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap();
    // GetPluginInfo hangs in this server: the call must end at the deadline, not hang.
    let mut identity = conn.identity();
    let call = conn.call("GetPluginInfo", v1::GetPluginInfoRequest {}, |r| async move { identity.get_plugin_info(r).await });
    let err = tokio::time::timeout(HANG, call).await.expect("the call ends at its deadline").unwrap_err();
    assert_eq!(err.code_name(), "DEADLINE_EXCEEDED");
    assert!(err.to_string().contains("GetPluginInfo failed with DEADLINE_EXCEEDED"), "{err}");
    assert!(err.direction().contains("--rpc-timeout"));
    let stats = conn.stats().snapshot();
    assert_eq!(stats["GetPluginInfo"].calls, 1);
    assert_eq!(stats["GetPluginInfo"].errors, 1);
    server.abort();
}

enum Identity {
    Ready(Option<bool>),
    Failing,
    /// Ready, but every Probe answer takes this long.
    Slow(Duration),
}

#[tonic::async_trait]
impl identity_server::Identity for Identity {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        // Never answers: lets tests check the client's deadline.
        std::future::pending().await
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::GetPluginCapabilitiesResponse::default()))
    }

    async fn probe(&self, _: Request<v1::ProbeRequest>) -> Result<Response<v1::ProbeResponse>, Status> {
        match self {
            Identity::Ready(ready) => Ok(Response::new(v1::ProbeResponse { ready: *ready })),
            Identity::Failing => Err(Status::failed_precondition("backend offline")),
            Identity::Slow(delay) => {
                tokio::time::sleep(*delay).await;
                Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
            }
        }
    }
}

async fn serve_identity(path: &Path, identity: Identity) {
    let listener = UnixListener::bind(path).unwrap();
    tonic::transport::Server::builder()
        .add_service(identity_server::IdentityServer::new(identity))
        .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
        .await
        .unwrap();
}

/// A connection lost mid-call gives every call in flight a status the client library made
/// (whatever code and message it carries): never taken for the plugin's answer, since the
/// plugin may have done what it was asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_of_calls_cut_off_by_a_lost_connection_are_the_transports_not_the_plugins() {
    use crate::support::{
        create_req,
        fake_plugin::{FakeOptions, FakePlugin},
        snw,
    };
    use csi_conform::{client::ErrorOrigin, proto};
    let fake = FakePlugin::start(FakeOptions::default()).await;
    let conn = fake.connect_with(ClientOptions { rpc_timeout: HANG, ..ClientOptions::default() }).await;
    let method = proto::method("CreateVolume").unwrap();
    // Several calls wait in the plugin, then one makes it die before answering.
    let held = (0..3).map(|i| {
        let request = v1::CreateVolumeRequest {
            parameters: [("hold".to_owned(), "never".to_owned())].into(),
            ..create_req(&format!("held-{i}"), vec![snw()])
        };
        let (conn, method) = (conn.clone(), method.clone());
        tokio::spawn(async move { conn.call_dynamic(&method, proto::to_dynamic(&request)).await })
    });
    let held: Vec<_> = held.collect();
    // Bounded wait for the three to be in the plugin (it counts calls in flight).
    let until = std::time::Instant::now() + HANG;
    while fake.in_flight() < 3 {
        assert!(std::time::Instant::now() < until, "the held calls never reached the plugin");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let crash = conn.call_dynamic(&method, proto::to_dynamic(&create_req("dies-crash", vec![snw()]))).await;
    let mut errors = vec![crash.expect_err("the plugin died before answering")];
    for call in held {
        errors.push(call.await.unwrap().expect_err("the plugin died before answering"));
    }
    for e in &errors {
        assert_eq!(e.origin, ErrorOrigin::Transport, "{e} ({:?}, {:?})", e.code, e.message);
        assert!(e.is_unreachable(), "{e}");
    }
}
