//! Mount points on this host: mountinfo parsing (this process's, or another process's through
//! /proc/PID), mount namespace identities, bind mounts, a private mount namespace of one's
//! own, and the CAP_SYS_ADMIN check.
//!
//! Everything here reads the kernel's view of a mount namespace, so the harness and the
//! reference plugin agree on what "mounted" means without shelling out to `mount(8)` or
//! `findmnt(8)`.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

/// The kernel's mount table of this process.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// One line of `/proc/self/mountinfo` (see proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// Unique id of the mount.
    pub mount_id: u64,
    /// Id of the parent mount.
    pub parent_id: u64,
    /// `major:minor` of the device.
    pub device: String,
    /// The directory of the file system that forms the root of this mount (bind mounts show
    /// the bound sub-directory here).
    pub root: PathBuf,
    /// Where it is mounted, relative to this process's root.
    pub mount_point: PathBuf,
    /// Per-mount options (`rw`, `ro`, `nosuid`, ...).
    pub mount_options: Vec<String>,
    /// Optional fields (`shared:N`, `master:N`, ...).
    pub optional_fields: Vec<String>,
    /// File system type (`ext4`, `tmpfs`, ...).
    pub fs_type: String,
    /// File-system specific source (`/dev/sda1`, `tmpfs`, ...).
    pub source: String,
    /// Super-block options.
    pub super_options: Vec<String>,
    /// Whether this mount is read-only (the per-mount `ro` option).
    pub read_only: bool,
}

/// Why a mountinfo line could not be read.
#[derive(Debug, thiserror::Error)]
#[error("mountinfo line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

/// Undoes the octal escapes (`\040` for space, `\011` tab, `\012` newline, `\134` backslash)
/// that the kernel applies to paths in mountinfo.
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            if let Ok(b) = u8::try_from(value) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn split_options(field: &str) -> Vec<String> {
    field
        .split(',')
        .filter(|s| !s.is_empty())
        .map(unescape)
        .collect()
}

/// Parses one mountinfo line (without its newline).
pub fn parse_line(text: &str, line: usize) -> Result<MountInfo, ParseError> {
    let err = |reason: &str| ParseError {
        line,
        reason: reason.to_owned(),
    };
    let fields: Vec<&str> = text.split(' ').filter(|f| !f.is_empty()).collect();
    let sep = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or_else(|| err("no ' - ' separator"))?;
    if sep < 6 {
        return Err(err("fewer than 6 fields before the separator"));
    }
    if fields.len() < sep + 3 {
        return Err(err("fewer than 3 fields after the separator"));
    }
    let mount_id = fields[0]
        .parse()
        .map_err(|_| err("mount id is not a number"))?;
    let parent_id = fields[1]
        .parse()
        .map_err(|_| err("parent id is not a number"))?;
    let mount_options = split_options(fields[5]);
    let read_only = mount_options.iter().any(|o| o == "ro");
    Ok(MountInfo {
        mount_id,
        parent_id,
        device: fields[2].to_owned(),
        root: PathBuf::from(unescape(fields[3])),
        mount_point: PathBuf::from(unescape(fields[4])),
        mount_options,
        optional_fields: fields[6..sep].iter().map(|s| (*s).to_owned()).collect(),
        fs_type: unescape(fields[sep + 1]),
        source: unescape(fields[sep + 2]),
        super_options: fields
            .get(sep + 3)
            .map(|f| split_options(f))
            .unwrap_or_default(),
        read_only,
    })
}

/// Parses a whole mountinfo text; blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<MountInfo>, ParseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_line(l, i + 1))
        .collect()
}

/// The current mount table of this process.
pub fn mounts() -> io::Result<Vec<MountInfo>> {
    let text = std::fs::read_to_string(MOUNTINFO)?;
    parse(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The mount table of process `pid` (its mount namespace, mount points relative to its root).
pub fn mounts_of(pid: i32) -> io::Result<Vec<MountInfo>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    parse(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The identity of the mount namespace of process `pid` (this process with `None`), as the
/// kernel names it: `mnt:[4026531841]`. Two processes share a mount namespace exactly when
/// these are equal.
pub fn mount_namespace(pid: Option<i32>) -> io::Result<String> {
    let link = match pid {
        Some(pid) => format!("/proc/{pid}/ns/mnt"),
        None => "/proc/self/ns/mnt".to_owned(),
    };
    Ok(std::fs::read_link(link)?.display().to_string())
}

/// `path` made absolute and free of symlinks where it exists; as given otherwise. Mountinfo
/// lists resolved paths, so lookups must resolve too.
fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The most symlinks [`resolve_in`] follows (as the kernel's path walk).
const MAX_SYMLINKS: usize = 40;

/// `path` (absolute, as a process whose root is `root` names it) free of symlinks, followed
/// inside `root` as that process would follow them: an absolute link target starts again at
/// `root`, never at this process's `/`. The part that does not exist is kept as given.
pub fn resolve_in(root: &Path, path: &Path) -> PathBuf {
    use std::path::Component;
    let mut resolved = PathBuf::from("/");
    let mut rest: Vec<std::ffi::OsString> =
        path.components().rev().filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        }).collect();
    let mut links = 0;
    while let Some(part) = rest.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        let on_disk = root.join(candidate.strip_prefix("/").unwrap_or(&candidate));
        match std::fs::symlink_metadata(&on_disk) {
            Ok(m) if m.file_type().is_symlink() && links < MAX_SYMLINKS => {
                links += 1;
                let Ok(target) = std::fs::read_link(&on_disk) else {
                    resolved = candidate;
                    continue;
                };
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                rest.extend(target.components().rev().filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    Component::ParentDir => Some("..".into()),
                    _ => None,
                }));
            }
            Ok(_) => resolved = candidate,
            Err(_) => {
                // Nothing more to follow: the rest is kept as given.
                resolved = candidate;
                while let Some(p) = rest.pop() {
                    if p == ".." { resolved.pop(); } else { resolved.push(p); }
                }
            }
        }
    }
    resolved
}

/// The topmost mount whose mount point is exactly `path`, if any.
pub fn mount_entry(path: &Path) -> Option<MountInfo> {
    let path = resolve(path);
    mounts()
        .ok()?
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path)
}

/// Whether something is mounted exactly at `path`.
pub fn is_mount_point(path: &Path) -> bool {
    mount_entry(path).is_some()
}

/// Every mount whose mount point is exactly `path`, bottom first: more than one means mounts
/// are stacked there (a plugin that mounts again on every repeated publish).
pub fn mounts_at(path: &Path) -> Vec<MountInfo> {
    let path = resolve(path);
    mounts().unwrap_or_default().into_iter().filter(|m| m.mount_point == path).collect()
}

impl MountInfo {
    /// Whether the per-mount options include `option` (`nosuid`, `ro`, ...).
    pub fn has_option(&self, option: &str) -> bool {
        self.mount_options.iter().any(|o| o == option)
    }
}

/// The per-mount (VFS) options a bind mount can carry, by the name mount(8) and mountinfo
/// use. Other mount flags are file-system options that only the file system's own mount
/// understands.
pub const VFS_OPTIONS: [(&str, MsFlags); 6] = [
    ("ro", MsFlags::MS_RDONLY),
    ("nosuid", MsFlags::MS_NOSUID),
    ("nodev", MsFlags::MS_NODEV),
    ("noexec", MsFlags::MS_NOEXEC),
    ("noatime", MsFlags::MS_NOATIME),
    ("nodiratime", MsFlags::MS_NODIRATIME),
];

/// The VFS options named in a capability's mount flags (each flag may hold several,
/// comma-separated, as `-o` takes them), in [`VFS_OPTIONS`] order; the rest are left out.
pub fn vfs_options<S: AsRef<str>>(mount_flags: &[S]) -> Vec<&'static str> {
    let given: Vec<&str> =
        mount_flags.iter().flat_map(|f| f.as_ref().split(',')).map(str::trim).collect();
    VFS_OPTIONS.iter().filter(|(name, _)| given.contains(name)).map(|(name, _)| *name).collect()
}

/// The `MsFlags` of the VFS options named in `mount_flags` (see [`vfs_options`]).
pub fn vfs_flags<S: AsRef<str>>(mount_flags: &[S]) -> MsFlags {
    let names = vfs_options(mount_flags);
    VFS_OPTIONS.iter().filter(|(name, _)| names.contains(name)).fold(MsFlags::empty(), |acc, (_, f)| acc | *f)
}

/// Every mount at or below `dir`, in mount-table order.
pub fn mounts_under(dir: &Path) -> Vec<MountInfo> {
    let dir = resolve(dir);
    mounts()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.mount_point.starts_with(&dir))
        .collect()
}

/// Why this process could not move into a mount namespace of its own.
#[derive(Debug, thiserror::Error)]
pub enum PrivateMountsError {
    /// Threads share their mount namespace: only a single-threaded process can leave it.
    #[error("a mount namespace of its own needs a single-threaded process, and this one has {0} threads")]
    Threads(usize),
    /// unshare(CLONE_NEWNS) was refused (no CAP_SYS_ADMIN, or a seccomp filter).
    #[error("unshare(CLONE_NEWNS) failed: {0}")]
    Unshare(nix::errno::Errno),
    /// `/` could not be made private.
    #[error("making / private (mount --make-rprivate /) failed: {0}")]
    Private(nix::errno::Errno),
}

/// Moves this process into a mount namespace of its own, as a containerized plugin lives:
/// `unshare(CLONE_NEWNS)`, then every mount made private recursively, so that mounts made
/// from now on are seen by this process only (and mounts made elsewhere are not seen here).
/// Must be called while the process has one thread: the kernel refuses otherwise, since a
/// multi-threaded process shares its file system context between threads.
pub fn enter_private_mount_namespace() -> Result<(), PrivateMountsError> {
    let threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(1);
    if threads > 1 {
        return Err(PrivateMountsError::Threads(threads));
    }
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(PrivateMountsError::Unshare)?;
    nix::mount::mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(PrivateMountsError::Private)
}

/// The effective capability bit of CAP_SYS_ADMIN.
const CAP_SYS_ADMIN: u32 = 21;

/// Parses the `CapEff:` line of a `/proc/<pid>/status` text.
pub fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// Whether this process may mount: CAP_SYS_ADMIN is in its effective set.
pub fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| cap_eff(&s))
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Bind-mounts `source` (a directory or a file) at `target`, which must exist and be of the
/// same kind. With `read_only` the new mount is then remounted read-only; only the new mount
/// changes, never `source`.
pub fn bind_mount(source: &Path, target: &Path, read_only: bool) -> io::Result<()> {
    nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(io::Error::from)?;
    if read_only && let Err(e) = remount_read_only(target) {
        // Never leave a writable mount behind when read-only was asked for.
        let _ = nix::mount::umount2(target, MntFlags::MNT_DETACH);
        return Err(e);
    }
    Ok(())
}

/// Makes the bind mount at `target` read-only (`MS_BIND | MS_REMOUNT | MS_RDONLY`); only that
/// mount changes, not the file system it shows.
pub fn remount_read_only(target: &Path) -> io::Result<()> {
    remount(target, MsFlags::MS_RDONLY)
}

/// Sets the per-mount flags of the bind mount at `target` to `flags` (VFS flags such as
/// `MS_RDONLY`, `MS_NOSUID`; see [`vfs_flags`]) with `MS_BIND | MS_REMOUNT`; only that mount
/// changes, not the file system it shows.
pub fn remount(target: &Path, flags: MsFlags) -> io::Result<()> {
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags;
    nix::mount::mount(None::<&str>, target, None::<&str>, flags, None::<&str>)
        .map_err(io::Error::from)
}

/// Unmounts whatever is mounted at `target` (every stacked mount); a busy mount is detached
/// lazily. Not being a mount point is not an error.
pub fn unmount(target: &Path) -> io::Result<()> {
    while is_mount_point(target) {
        match nix::mount::umount2(target, MntFlags::empty()) {
            Ok(()) => {}
            Err(nix::errno::Errno::EBUSY) => {
                nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(io::Error::from)?
            }
            Err(nix::errno::Errno::EINVAL) => return Ok(()),
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
28 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
97 28 8:1 /var/lib/vol\\040one /mnt/my\\040dir ro,relatime shared:1 master:3 - ext4 /dev/sda1 rw
98 28 0:50 / /tmp/x rw - tmpfs tmpfs rw,size=1024k
";

    #[test]
    fn parses_fields_optional_fields_and_escapes() {
        let all = parse(SAMPLE).unwrap();
        assert_eq!(all.len(), 4);
        let bind = &all[2];
        assert_eq!(bind.mount_id, 97);
        assert_eq!(bind.parent_id, 28);
        assert_eq!(bind.device, "8:1");
        assert_eq!(bind.root, PathBuf::from("/var/lib/vol one"));
        assert_eq!(bind.mount_point, PathBuf::from("/mnt/my dir"));
        assert_eq!(bind.optional_fields, vec!["shared:1", "master:3"]);
        assert_eq!(bind.fs_type, "ext4");
        assert_eq!(bind.source, "/dev/sda1");
        assert!(bind.read_only, "per-mount ro wins over the super-block rw");
        assert!(!all[1].read_only);
        let tmp = &all[3];
        assert!(tmp.optional_fields.is_empty());
        assert_eq!(tmp.super_options, vec!["rw", "size=1024k"]);
    }

    #[test]
    fn unescapes_octal_sequences_only() {
        assert_eq!(unescape("a\\040b"), "a b");
        assert_eq!(unescape("tab\\011nl\\012bs\\134"), "tab\tnl\nbs\\");
        assert_eq!(unescape("no\\escape"), "no\\escape");
        assert_eq!(unescape("trail\\04"), "trail\\04");
        assert_eq!(unescape("\\1234"), "S4");
    }

    #[test]
    fn rejects_malformed_lines_with_their_number() {
        let err = parse("28 1 8:1 / / rw - ext4 /dev/sda1 rw\nbogus line\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse_line("x 1 8:1 / / rw - ext4 src rw", 1).is_err());
        assert!(parse_line("1 1 8:1 / / rw - ext4", 1).is_err());
    }

    #[test]
    fn picks_the_vfs_options_out_of_mount_flags() {
        let flags = ["noexec,vers=4.2", " nosuid ", "nolock", "ro"];
        assert_eq!(vfs_options(&flags), vec!["ro", "nosuid", "noexec"]);
        assert_eq!(vfs_flags(&flags), MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC);
        assert!(vfs_options::<&str>(&[]).is_empty());
        assert_eq!(vfs_flags(&["nolock"]), MsFlags::empty());
        let entry = parse_line("98 28 0:50 / /tmp/x rw,nosuid,nodev - tmpfs tmpfs rw", 1).unwrap();
        assert!(entry.has_option("nosuid") && !entry.has_option("noexec"));
    }

    #[test]
    fn reads_the_effective_capability_set() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(cap_eff("Name: x\n"), None);
    }

    #[test]
    fn resolves_symlinks_inside_a_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("/real", r.join("abs")).unwrap();
        std::os::unix::fs::symlink("real/sub", r.join("rel")).unwrap();
        std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
        assert_eq!(resolve_in(r, Path::new("/abs/sub")), PathBuf::from("/real/sub"), "an absolute link stays inside the root");
        assert_eq!(resolve_in(r, Path::new("/rel/x/y")), PathBuf::from("/real/sub/x/y"), "the missing rest is kept");
        assert_eq!(resolve_in(r, Path::new("/real/../rel")), PathBuf::from("/real/sub"));
        assert_eq!(resolve_in(r, Path::new("/loop")), PathBuf::from("/loop"), "a link loop ends");
    }

    #[test]
    fn a_multi_threaded_process_is_refused_a_namespace_of_its_own() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let before = mount_namespace(None).unwrap();
        let err = enter_private_mount_namespace().unwrap_err();
        assert!(matches!(err, PrivateMountsError::Threads(n) if n >= 2), "{err}");
        assert!(err.to_string().contains("single-threaded"), "{err}");
        assert_eq!(mount_namespace(None).unwrap(), before, "nothing changed");
        tx.send(()).unwrap();
        let _ = other.join();
    }

    #[test]
    fn this_process_shares_its_own_mount_namespace() {
        let own = mount_namespace(None).unwrap();
        assert!(own.starts_with("mnt:["), "{own}");
        assert_eq!(mount_namespace(Some(std::process::id() as i32)).unwrap(), own);
        assert!(mounts_of(std::process::id() as i32).unwrap().iter().any(|m| m.mount_point == Path::new("/")));
    }

    #[test]
    fn the_live_mount_table_parses_and_has_a_root() {
        let all = mounts().expect("this process's mountinfo parses");
        assert!(all.iter().any(|m| m.mount_point == Path::new("/")));
        assert!(is_mount_point(Path::new("/")));
        assert!(!mounts_under(Path::new("/")).is_empty());
    }
}
