//! A network namespace of the test's own, standing in for a remote node host: a node plugin
//! runs inside it on that namespace's loopback, and the test reaches it over TCP through a
//! forwarder on this namespace's loopback. No traffic ever leaves a loopback interface (the
//! forwarder opens its upstream sockets inside the namespace with setns(2)), and the
//! namespace is deleted when the value is dropped, pass or fail.

use std::{
    fs::File,
    net::{Ipv4Addr, SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use nix::sched::{CloneFlags, setns};

/// A network namespace this test created (`ip netns add`), with its loopback up.
pub struct NetNs {
    name: String,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl NetNs {
    /// Creates a fresh namespace, or says why that is impossible here (no `ip`, no rights).
    pub fn create() -> Result<NetNs, String> {
        let name = format!("csi-conform-it-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        ip(&["netns", "add", &name])?;
        let ns = NetNs { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// `ip netns exec <name> <program>`: the program runs inside the namespace (and, as `ip`
    /// does it, in a mount namespace of its own, so its mounts are not seen here).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Connects to `127.0.0.1:port` inside the namespace.
    pub fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        connect_in(&self.path(), port)
    }

    /// Waits until something listens on `port` inside the namespace.
    pub async fn wait_for_listener(&self, port: u16, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match self.connect(port) {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() > within => return Err(format!("nothing listens on port {port}: {e}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Forwards a new listener on this namespace's `127.0.0.1` to `127.0.0.1:port` inside the
    /// namespace; returns the listener's address. The forwarder lives as long as the runtime.
    pub async fn forward(&self, port: u16) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind a loopback port");
        let addr = listener.local_addr().expect("a local address");
        let ns = self.path();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let ns = ns.clone();
                tokio::spawn(async move {
                    let up = tokio::task::spawn_blocking(move || connect_in(&ns, port)).await;
                    let Ok(Ok(up)) = up else { return };
                    if up.set_nonblocking(true).is_err() {
                        return;
                    }
                    let Ok(mut up) = tokio::net::TcpStream::from_std(up) else { return };
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                });
            }
        });
        addr
    }
}

/// Connects to `127.0.0.1:port` inside the namespace at `ns`: the socket is made on a thread
/// that entered the namespace (the thread then ends), and keeps that namespace for its life.
fn connect_in(ns: &Path, port: u16) -> std::io::Result<TcpStream> {
    let file = File::open(ns)?;
    std::thread::spawn(move || {
        setns(&file, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
        TcpStream::connect((Ipv4Addr::LOCALHOST, port))
    })
    .join()
    .map_err(|_| std::io::Error::other("the connecting thread panicked"))?
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "delete", &self.name]) {
            eprintln!("could not delete the network namespace {}: {e}", self.name);
        }
    }
}
