//! The plugin process as /proc shows it: which pid serves a unix socket (its inode in
//! /proc/net/unix, then the process holding that inode among its fds, cross-checked with the
//! socket's SO_PEERCRED), and that process's CPU time, resident memory, open fds and mounts.

use std::{
    io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// How the process serving a socket was found, and by which witnesses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessFound {
    /// Its pid.
    pub pid: i32,
    /// The socket it serves.
    pub socket: PathBuf,
    /// Whether it is this process (a plugin served in-process shares its CPU, memory and fds
    /// with the harness: its figures are then the harness's too).
    pub shares_harness: bool,
    /// How it was found: `/proc/net/unix` (the listening inode held among its fds), and
    /// whether SO_PEERCRED agreed.
    pub how: String,
}

/// One reading of a process's resources.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcSample {
    /// User plus system CPU time so far, its own and its reaped children's, seconds.
    pub cpu_seconds: f64,
    /// Resident memory now, KiB (VmRSS).
    pub rss_kib: u64,
    /// Peak resident memory so far, KiB (VmHWM).
    pub peak_rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Mounts in its mount namespace.
    pub mounts: u64,
}

/// The inodes of the unix sockets listening at `socket`, from the text of /proc/net/unix.
/// Columns: `Num RefCount Protocol Flags Type St Inode Path`; a listening socket has the
/// `__SO_ACCEPTCON` flag (0x10000) and state 01. The path is the one the socket was bound
/// to: a server that binds a temporary name and renames it into place (as the reference
/// plugin does) is listed under that name, so with `renamed` every listening socket bound in
/// the same directory is taken.
pub fn listening_inodes(net_unix: &str, socket: &Path, renamed: bool) -> Vec<u64> {
    net_unix
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (flags, inode, path) = (cols.get(3)?, cols.get(6)?, Path::new(cols.get(7)?));
            let flags = u64::from_str_radix(flags, 16).ok()?;
            let at = if renamed { path.parent() == socket.parent() } else { path == socket };
            (at && flags & 0x10000 != 0).then(|| inode.parse().ok()).flatten()
        })
        .collect()
}

/// The pids whose fds hold one of `inodes` (`socket:[INODE]` links under /proc/PID/fd).
fn holders(inodes: &[u64]) -> Vec<i32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<i32> = procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok)
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str())))
            })
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Finds the process serving the unix socket at `socket`: the holder of its listening inode
/// (/proc/net/unix, then /proc/*/fd), checked against the socket's SO_PEERCRED. When they
/// disagree, or several processes hold the inode (a forking server), nothing is claimed.
pub async fn serving(socket: &Path) -> Result<ProcessFound, String> {
    let socket = std::fs::canonicalize(socket).unwrap_or_else(|_| socket.to_owned());
    let net_unix = std::fs::read_to_string("/proc/net/unix").map_err(|e| format!("/proc/net/unix: {e}"))?;
    let exact = listening_inodes(&net_unix, &socket, false);
    let renamed = exact.is_empty();
    let inodes = if renamed { listening_inodes(&net_unix, &socket, true) } else { exact };
    if inodes.is_empty() {
        return Err(format!("no socket listening at {} in /proc/net/unix (another network namespace?)", socket.display()));
    }
    let pids = holders(&inodes);
    let peer = crate::suite::socket_peer(&socket).await.ok().flatten();
    let pid = match pids.as_slice() {
        [pid] => *pid,
        [] => return Err(format!("no process here holds {}'s socket (another pid namespace?)", socket.display())),
        // Sockets bound in the same directory by several servers: SO_PEERCRED picks the one.
        many if renamed && peer.is_some_and(|p| many.contains(&p)) => peer.unwrap_or_default(),
        many => return Err(format!("several processes hold {}'s socket: {many:?}", socket.display())),
    };
    let bound = if renamed { " (bound under another name in its directory, then renamed)" } else { "" };
    let how = match peer {
        Some(p) if p == pid => format!("/proc/net/unix inode{bound} held in /proc/PID/fd; SO_PEERCRED agrees"),
        Some(p) => {
            return Err(format!(
                "/proc says pid {pid} serves {}, SO_PEERCRED says pid {p}: the two witnesses disagree, no figures are claimed",
                socket.display()
            ));
        }
        None if renamed => return Err(format!("no socket was bound at {} and SO_PEERCRED gave no pid", socket.display())),
        None => "/proc/net/unix inode held in /proc/PID/fd (SO_PEERCRED gave no pid)".to_owned(),
    };
    Ok(ProcessFound { pid, socket, shares_harness: pid == std::process::id() as i32, how })
}

/// Clock ticks per second (`getconf CLK_TCK`).
fn ticks_per_second() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    }
}

/// utime + stime + cutime + cstime (fields 14 to 17) of a /proc/PID/stat text, in ticks: the
/// process's own CPU and that of the commands it ran and reaped (a plugin's mount, mkfs or tar
/// work is its cost too). The command name (field 2) may hold spaces and parentheses: fields
/// are counted after its last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, so index 11.
    (11..15).map(|i| fields.get(i)?.parse::<u64>().ok()).sum()
}

/// A `Vm...:  1234 kB` value of a /proc/PID/status text.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok())
}

/// Reads process `pid`'s resources now.
pub fn sample(pid: i32) -> io::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?.lines().count() as u64;
    Ok(ProcSample {
        cpu_seconds: cpu_ticks(&stat).unwrap_or(0) as f64 / ticks_per_second(),
        rss_kib: status_kib(&status, "VmRSS").unwrap_or(0),
        peak_rss_kib: status_kib(&status, "VmHWM").unwrap_or(0),
        fds,
        mounts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listening_socket_at_the_path_is_taken() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 4242 /tmp/x/csi.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 4343 /tmp/x/csi.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 4444 /tmp/y/csi.sock\n\
            0000000000000000: 00000002 00000000 00000000 0001 01 4545\n";
        assert_eq!(listening_inodes(text, Path::new("/tmp/x/csi.sock"), false), vec![4242]);
        assert_eq!(listening_inodes(text, Path::new("/tmp/y/other.sock"), true), vec![4444]);
    }

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "77 (a b) c) S 1 77 77 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 4 0 123 1000 200";
        assert_eq!(cpu_ticks(stat), Some(310));
        assert_eq!(status_kib("Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t 1024 kB\n", "VmRSS"), Some(1024));
    }

    /// A real listening socket in this process is found as this process, by both witnesses.
    #[tokio::test]
    async fn the_process_serving_a_socket_is_found_through_proc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        let found = serving(&path).await.unwrap();
        assert_eq!(found.pid, std::process::id() as i32);
        assert!(found.shares_harness);
        assert!(found.how.contains("SO_PEERCRED agrees"), "{}", found.how);
        let now = sample(found.pid).unwrap();
        assert!(now.fds > 2 && now.rss_kib > 0 && now.peak_rss_kib >= now.rss_kib && now.mounts > 0, "{now:?}");
        assert!(serving(&dir.path().join("none.sock")).await.is_err());
    }
}
