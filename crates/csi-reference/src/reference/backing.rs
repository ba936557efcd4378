//! Backing stores on the local file system: a directory per mount volume, a sparse file per
//! block volume (or, with `--allocate`, one whose every byte is allocated, as hostpath's
//! fallocated files are), copies of both for snapshots and clones, and the allocated /
//! changed extents of block files (what SnapshotMetadata reports).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{Whence, lseek};
use tempfile::TempDir;

/// The root under which backing stores live: `<state-dir>` or a private temporary directory.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    _temp: Option<TempDir>,
    /// Block files and their copies take all their bytes on the file system.
    allocate: bool,
}

/// Free space a tmpfs must have for [`scratch_dir`] to choose it.
const SCRATCH_MIN_FREE: u64 = 1 << 30;

/// A private temporary directory for a reference plugin's state and volumes, removed when
/// dropped. In memory (`/dev/shm`, tmpfs) where there is one with at least 1 GiB free and
/// `TMPDIR` names no other place: the volumes are sparse and their data small, and on a disk
/// file system that many runs have filled and emptied, every `mkdir` of a volume's store
/// scans for recently freed inodes (ext4), which made the plugin's kernel time the larger
/// part of a run. Elsewhere the system's temporary directory.
pub fn scratch_dir() -> io::Result<TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("csi-conform-reference-");
    let shm = Path::new("/dev/shm");
    let roomy = |path: &Path| {
        nix::sys::statvfs::statvfs(path)
            .is_ok_and(|v| v.blocks_available().saturating_mul(v.fragment_size()) >= SCRATCH_MIN_FREE)
    };
    if std::env::var_os("TMPDIR").is_none() && shm.is_dir() && roomy(shm)
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return Ok(dir);
    }
    builder.tempdir()
}

/// The sub-directory of a backing store that holds the file system of mount access.
const FS: &str = "fs";
/// The file of a backing store that holds the bytes of block access.
const BLOCK: &str = "block";

impl DataDir {
    /// Backing stores under `state_dir`, or in a private temporary directory that is removed
    /// when this value is dropped.
    pub fn new(state_dir: Option<&Path>) -> io::Result<DataDir> {
        match state_dir {
            Some(dir) => Ok(DataDir {
                root: dir.to_path_buf(),
                _temp: None,
                allocate: false,
            }),
            None => {
                let temp = scratch_dir()?;
                Ok(DataDir {
                    root: temp.path().to_path_buf(),
                    _temp: Some(temp),
                    allocate: false,
                })
            }
        }
    }

    /// With `allocate`, block files (created, copied, grown) take every byte of their size
    /// on the file system, as a plugin that fallocates its volumes does; without, they are
    /// sparse.
    pub fn allocating(mut self, allocate: bool) -> DataDir {
        self.allocate = allocate;
        self
    }

    /// `<root>/volumes/<id>`.
    pub fn volume(&self, id: &str) -> Store {
        Store {
            dir: self.root.join("volumes").join(safe_component(id)),
            allocate: self.allocate,
        }
    }

    /// `<root>/snapshots/<id>`.
    pub fn snapshot(&self, id: &str) -> Store {
        Store {
            dir: self.root.join("snapshots").join(safe_component(id)),
            allocate: self.allocate,
        }
    }
}

/// An id as a single, harmless path component: itself when it is plain, hex-encoded otherwise
/// (statically provisioned volume ids come from the CO and could contain `/` or `..`).
pub fn safe_component(id: &str) -> String {
    let plain = !id.is_empty()
        && id != "."
        && id != ".."
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if plain {
        id.to_owned()
    } else {
        format!(
            "x-{}",
            id.bytes().map(|b| format!("{b:02x}")).collect::<String>()
        )
    }
}

/// One backing store: `fs/` (mount access) and/or `block` (block access).
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// Whether its block file takes all its bytes (see [`DataDir::allocating`]).
    allocate: bool,
}

/// Whether an I/O error is the file system running out of space (ENOSPC, EDQUOT).
pub fn no_space(e: &io::Error) -> bool {
    e.raw_os_error().is_some_and(|c| c == nix::libc::ENOSPC || c == nix::libc::EDQUOT)
}

impl Store {
    /// The file-system directory.
    pub fn fs(&self) -> PathBuf {
        self.dir.join(FS)
    }
    /// The block file.
    pub fn block(&self) -> PathBuf {
        self.dir.join(BLOCK)
    }

    /// Creates an empty store: the directory and/or a sparse block file of `capacity` bytes.
    pub fn create(&self, mount: bool, block: bool, capacity: i64) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        if mount {
            fs::create_dir_all(self.fs())?;
            fs::set_permissions(self.fs(), fs::Permissions::from_mode(0o777))?;
        }
        if block {
            let f = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(self.block())?;
            f.set_len(capacity.max(0) as u64)?;
            self.allocate_all(&f)?;
        }
        Ok(())
    }

    /// With allocation on, allocates every byte of the block file `f` (its data stays).
    fn allocate_all(&self, f: &File) -> io::Result<()> {
        let len = f.metadata()?.len();
        if self.allocate && len > 0 {
            nix::fcntl::fallocate(f, nix::fcntl::FallocateFlags::empty(), 0, len as i64).map_err(io::Error::from)?;
        }
        Ok(())
    }

    /// Fills this store from `source`: copies its directory tree and its block file (sparse).
    /// A block file is then sized to `capacity`.
    pub fn fill_from(&self, source: &Store, capacity: i64) -> io::Result<()> {
        if source.fs().is_dir() && self.fs().is_dir() {
            copy_tree(&source.fs(), &self.fs())?;
        }
        if source.block().is_file() && self.block().is_file() {
            sparse_copy(&source.block(), &self.block())?;
            let f = OpenOptions::new().write(true).open(self.block())?;
            if f.metadata()?.len() < capacity as u64 {
                f.set_len(capacity as u64)?;
            }
            self.allocate_all(&f)?;
        }
        Ok(())
    }

    /// Zeroes the second half of the block file, if there is one (the `restore-head-only`
    /// quirk): cut to half its length, then grown back, so the tail reads as zeros.
    pub fn zero_block_tail(&self) -> io::Result<()> {
        if !self.block().is_file() {
            return Ok(());
        }
        let f = OpenOptions::new().write(true).open(self.block())?;
        let len = f.metadata()?.len();
        f.set_len(len / 2)?;
        f.set_len(len)
    }

    /// Copies a whole store (snapshotting): everything `source` has.
    pub fn copy_from(&self, source: &Store) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        if source.fs().is_dir() {
            fs::create_dir_all(self.fs())?;
            copy_tree(&source.fs(), &self.fs())?;
        }
        if source.block().is_file() {
            sparse_copy(&source.block(), &self.block())?;
            self.allocate_all(&OpenOptions::new().write(true).open(self.block())?)?;
        }
        Ok(())
    }

    /// Grows the block file to `capacity` bytes (never shrinks).
    pub fn grow_block(&self, capacity: i64) -> io::Result<()> {
        if !self.block().is_file() {
            return Ok(());
        }
        let f = OpenOptions::new().write(true).open(self.block())?;
        if f.metadata()?.len() < capacity as u64 {
            f.set_len(capacity as u64)?;
        }
        self.allocate_all(&f)
    }

    /// Makes this store the same storage as `source` (the `clone-shares-data` quirk): its
    /// file-system directory and block file become links to the source's, so removing this
    /// store removes only the links.
    pub fn share(&self, source: &Store) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        if source.fs().is_dir() {
            std::os::unix::fs::symlink(source.fs(), self.fs())?;
        }
        if source.block().is_file() {
            std::os::unix::fs::symlink(source.block(), self.block())?;
        }
        Ok(())
    }

    /// Discards the store's content (the `lose-data-on-unstage` quirk): the file-system
    /// directory is emptied and the block file zeroed, both keeping their place and size.
    pub fn wipe(&self) -> io::Result<()> {
        if self.fs().is_dir() {
            for entry in fs::read_dir(self.fs())? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    fs::remove_dir_all(entry.path())?;
                } else {
                    fs::remove_file(entry.path())?;
                }
            }
        }
        if self.block().is_file() {
            let f = OpenOptions::new().write(true).open(self.block())?;
            let len = f.metadata()?.len();
            f.set_len(0)?;
            f.set_len(len)?;
        }
        Ok(())
    }

    /// Removes the store; a store that is already gone is fine.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// Recursively copies the contents of directory `src` into the existing directory `dst`.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            fs::create_dir_all(&to)?;
            copy_tree(&from, &to)?;
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_file() {
            sparse_copy(&from, &to)?;
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
        }
        // Sockets, fifos and devices are not part of a volume's data.
    }
    Ok(())
}

const CHUNK: usize = 1 << 20;

/// Copies `src` to `dst` (created or truncated) without filling holes: only data extents are
/// read, and all-zero chunks are skipped.
pub fn sparse_copy(src: &Path, dst: &Path) -> io::Result<()> {
    let input = File::open(src)?;
    let len = input.metadata()?.len();
    let output = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dst)?;
    output.set_len(len)?;
    let mut buf = vec![0u8; CHUNK];
    for (start, size) in data_extents(&input, len)? {
        let mut offset = start;
        let end = start + size;
        while offset < end {
            let n = ((end - offset) as usize).min(CHUNK);
            let read = input.read_at(&mut buf[..n], offset)?;
            if read == 0 {
                break;
            }
            if buf[..read].iter().any(|b| *b != 0) {
                output.write_all_at(&buf[..read], offset)?;
            }
            offset += read as u64;
        }
    }
    Ok(())
}

/// The data extents `(offset, length)` of a file, in order, via SEEK_DATA / SEEK_HOLE. File
/// systems without hole reporting give one extent covering the whole file.
pub fn data_extents(file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let mut extents = Vec::new();
    let mut pos: u64 = 0;
    while pos < len {
        let start = match lseek(file, pos as i64, Whence::SeekData) {
            Ok(o) => o as u64,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(nix::errno::Errno::EINVAL) => return Ok(vec![(0, len)]),
            Err(e) => return Err(e.into()),
        };
        if start >= len {
            break;
        }
        let end = match lseek(file, start as i64, Whence::SeekHole) {
            Ok(o) => (o as u64).min(len),
            Err(nix::errno::Errno::ENXIO) => len,
            Err(e) => return Err(e.into()),
        };
        if end <= start {
            break;
        }
        extents.push((start, end - start));
        pos = end;
    }
    Ok(extents)
}

/// The allocated extents of the file at `path`.
pub fn allocated(path: &Path) -> io::Result<Vec<(u64, u64)>> {
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    data_extents(&f, len)
}

/// The byte ranges, in `granule`-sized units, where `target` differs from `base`, merged and
/// in order, within `target`'s length. Only extents that hold data in either file are read.
pub fn changed_extents(base: &Path, target: &Path, granule: u64) -> io::Result<Vec<(u64, u64)>> {
    let b = File::open(base)?;
    let t = File::open(target)?;
    let b_len = b.metadata()?.len();
    let t_len = t.metadata()?.len();
    let mut candidates = data_extents(&b, b_len)?;
    candidates.extend(data_extents(&t, t_len)?);
    candidates.sort();
    let mut changed: Vec<(u64, u64)> = Vec::new();
    let mut bb = vec![0u8; granule as usize];
    let mut tb = vec![0u8; granule as usize];
    let mut checked_to = 0u64;
    for (start, size) in candidates {
        let mut offset = (start / granule * granule).max(checked_to);
        let end = (start + size).min(t_len);
        while offset < end {
            let n = granule.min(t_len - offset) as usize;
            let rb = read_full(&b, &mut bb[..n], offset)?;
            bb[rb..n].fill(0);
            let rt = read_full(&t, &mut tb[..n], offset)?;
            tb[rt..n].fill(0);
            if bb[..n] != tb[..n] {
                match changed.last_mut() {
                    Some((s, l)) if *s + *l == offset => *l += n as u64,
                    _ => changed.push((offset, n as u64)),
                }
            }
            offset += n as u64;
        }
        checked_to = checked_to.max(offset);
    }
    Ok(changed)
}

fn read_full(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Bytes allocated and entries (inodes) used under `dir`, the directory itself included.
pub fn tree_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = 0;
    let mut inodes = 1;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            inodes += 1;
            bytes += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    (bytes, inodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_safe_path_components() {
        assert_eq!(safe_component("vol-000001"), "vol-000001");
        assert_eq!(safe_component("../etc"), "x-2e2e2f657463");
        assert_eq!(safe_component(".."), "x-2e2e");
        assert!(!safe_component("a/b").contains('/'));
    }

    #[test]
    fn sparse_files_copy_with_their_data_and_extents() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(Some(dir.path())).unwrap();
        let vol = data.volume("v1");
        vol.create(true, true, 16 << 20).unwrap();
        fs::write(vol.fs().join("hello.txt"), "hello").unwrap();
        fs::create_dir(vol.fs().join("sub")).unwrap();
        fs::write(vol.fs().join("sub/x"), "x").unwrap();
        let block = OpenOptions::new().write(true).open(vol.block()).unwrap();
        block.write_all_at(&[7u8; 4096], 8 << 20).unwrap();
        drop(block);

        let extents = allocated(&vol.block()).unwrap();
        assert!(!extents.is_empty());
        assert!(
            extents
                .iter()
                .all(|(o, l)| *o <= 8 << 20 && o + l >= (8 << 20) + 4096)
        );

        let snap = data.snapshot("s1");
        snap.copy_from(&vol).unwrap();
        assert_eq!(fs::read_to_string(snap.fs().join("sub/x")).unwrap(), "x");
        assert_eq!(fs::metadata(snap.block()).unwrap().len(), 16 << 20);
        assert!(
            changed_extents(&vol.block(), &snap.block(), 4096)
                .unwrap()
                .is_empty()
        );

        let block = OpenOptions::new().write(true).open(vol.block()).unwrap();
        block.write_all_at(&[1u8; 10], 4096 * 3 + 5).unwrap();
        drop(block);
        assert_eq!(
            changed_extents(&snap.block(), &vol.block(), 4096).unwrap(),
            vec![(4096 * 3, 4096)]
        );

        let clone = data.volume("v2");
        clone.create(true, true, 32 << 20).unwrap();
        clone.fill_from(&snap, 32 << 20).unwrap();
        assert_eq!(
            fs::read_to_string(clone.fs().join("hello.txt")).unwrap(),
            "hello"
        );
        assert_eq!(fs::metadata(clone.block()).unwrap().len(), 32 << 20);
        let (bytes, inodes) = tree_usage(&clone.fs());
        assert!(bytes > 0 && inodes >= 4, "{bytes} {inodes}");
        clone.remove().unwrap();
        clone.remove().unwrap();
        assert!(!clone.dir.exists());
    }

    #[test]
    fn shared_stores_are_one_storage_and_wiped_stores_keep_their_shape() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(Some(dir.path())).unwrap();
        let vol = data.volume("v1");
        vol.create(true, true, 1 << 20).unwrap();
        let shared = data.volume("v2");
        shared.share(&vol).unwrap();
        fs::write(shared.fs().join("m"), "x").unwrap();
        assert_eq!(fs::read_to_string(vol.fs().join("m")).unwrap(), "x");
        shared.remove().unwrap();
        assert_eq!(fs::read_to_string(vol.fs().join("m")).unwrap(), "x", "removing the sharer keeps the source");

        let block = OpenOptions::new().write(true).open(vol.block()).unwrap();
        block.write_all_at(&[9u8; 16], 4096).unwrap();
        drop(block);
        fs::create_dir(vol.fs().join("sub")).unwrap();
        vol.wipe().unwrap();
        assert_eq!(fs::read_dir(vol.fs()).unwrap().count(), 0);
        assert_eq!(fs::metadata(vol.block()).unwrap().len(), 1 << 20);
        assert!(fs::read(vol.block()).unwrap().iter().all(|b| *b == 0));
    }
}
