//! Data markers: 4 KiB of content derived from the run's seed, with an FNV-1a digest, written
//! into a published volume (a file under a mount target; offset 0 and the last 4 KiB of a
//! block target) and read back to prove the bytes survived. Plain file I/O on paths this
//! process can open; which paths those are is the caller's business.

use std::{
    fs::{File, OpenOptions},
    io::{self, Seek, SeekFrom},
    os::unix::fs::{FileExt, FileTypeExt},
    path::{Path, PathBuf},
};

/// The bytes of one marker (and of each of its copies on a block volume).
pub const MARKER_LEN: usize = 4096;

/// The file a marker is written to under a mount target.
pub const MARKER_FILE: &str = "csi-conform-marker";

/// FNV-1a, 64 bits: a small, well-known digest (integrity against loss and mix-ups, not
/// against an adversary).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// One marker: a label (`A`, `B`) and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// What findings call it.
    pub label: String,
    /// The content: a header line naming it, then seeded pseudo-random bytes.
    pub bytes: Vec<u8>,
}

impl Marker {
    /// The marker `label` of `scope` (the scenario's unique name) in the run with `seed`: the
    /// same inputs always give the same bytes, different labels different ones.
    pub fn new(seed: u64, scope: &str, label: &str) -> Marker {
        let header = format!("csi-conform data marker {label} of {scope}\n");
        let mut bytes = header.into_bytes();
        bytes.truncate(MARKER_LEN / 2);
        // splitmix64, seeded from the run's seed and the marker's name.
        let mut state = seed ^ fnv1a64(scope.as_bytes()).rotate_left(17) ^ fnv1a64(label.as_bytes());
        while bytes.len() < MARKER_LEN {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            bytes.extend_from_slice(&z.to_le_bytes());
        }
        bytes.truncate(MARKER_LEN);
        Marker { label: label.to_owned(), bytes }
    }

    /// The digest of the content, in hex.
    pub fn digest(&self) -> String {
        format!("{:016x}", fnv1a64(&self.bytes))
    }
}

/// Where a marker was written on a volume, so it is read back from the same place even when
/// the volume has since grown or a copy of it is larger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `MARKER_FILE` under the mount target.
    File,
    /// At offset 0 and at `tail` (the last 4 KiB of the device when written).
    Block {
        /// The offset of the second copy.
        tail: u64,
    },
}

impl Placement {
    /// The places of a marker on a volume, for messages.
    pub fn places(&self) -> Vec<(u64, String)> {
        match self {
            Placement::File => vec![(0, format!("file {MARKER_FILE}"))],
            Placement::Block { tail } => {
                vec![(0, "byte 0".to_owned()), (*tail, format!("byte {tail} (the last 4 KiB)"))]
            }
        }
    }
}

/// The size of a block target: the device's (seeking to its end gives what BLKGETSIZE64
/// does) or, for a file-backed target, the file's length.
pub fn block_size(path: &Path) -> io::Result<u64> {
    let meta = std::fs::metadata(path)?;
    if meta.file_type().is_block_device() {
        File::open(path)?.seek(SeekFrom::End(0))
    } else {
        Ok(meta.len())
    }
}

/// The total size of the file system mounted at `path` (statvfs: blocks × fragment size).
pub fn fs_size(path: &Path) -> io::Result<u64> {
    let vfs = nix::sys::statvfs::statvfs(path).map_err(io::Error::from)?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)] // c_ulong and fsblkcnt_t vary by target
    Ok((vfs.blocks() as u64).saturating_mul(vfs.fragment_size() as u64))
}

fn marker_file(target: &Path) -> PathBuf {
    target.join(MARKER_FILE)
}

/// Writes `marker` into the published volume at `target` (as this process sees it) and
/// flushes it to the volume. A mount target gets [`MARKER_FILE`]; a block target gets the
/// marker at offset 0 and in its last 4 KiB (so a device smaller than it claims fails here
/// or is caught by the caller's size check). `at` reuses an earlier placement (overwriting a
/// marker where it was).
pub fn write(target: &Path, block: bool, marker: &Marker, at: Option<&Placement>) -> io::Result<Placement> {
    if !block {
        let path = marker_file(target);
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(&path)?;
        file.write_all_at(&marker.bytes, 0)?;
        file.sync_all()?;
        return Ok(Placement::File);
    }
    let tail = match at {
        Some(Placement::Block { tail }) => *tail,
        _ => {
            let size = block_size(target)?;
            if size < 2 * MARKER_LEN as u64 {
                return Err(io::Error::other(format!("the block volume holds only {size} bytes")));
            }
            size - MARKER_LEN as u64
        }
    };
    let file = OpenOptions::new().write(true).open(target)?;
    file.write_all_at(&marker.bytes, 0)?;
    file.write_all_at(&marker.bytes, tail)?;
    file.sync_all()?;
    Ok(Placement::Block { tail })
}

/// What was found where a marker should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Nothing there: no marker file, or a block volume too small to hold the place.
    Missing,
    /// Only zero bytes: the volume is blank there.
    Blank,
    /// Another marker of the scenario, by label.
    Other(String),
    /// Different bytes, first at this offset of the marker.
    Differs(usize),
}

impl Mismatch {
    /// What was found, as the end of a sentence ("... is missing").
    pub fn describe(&self, place: &str, expected: &Marker) -> String {
        match self {
            Mismatch::Missing => format!("marker {} is missing ({place} is not there)", expected.label),
            Mismatch::Blank => format!("{place} is blank (all zero bytes) instead of marker {}", expected.label),
            Mismatch::Other(label) => format!("{place} holds marker {label} instead of marker {}", expected.label),
            Mismatch::Differs(at) => format!(
                "{place} differs from marker {} (digest {}) from its byte {at} on",
                expected.label,
                expected.digest()
            ),
        }
    }
}

/// Reads the marker back from where `placement` says it is and compares it by digest with
/// `expected`; `others` are the scenario's other markers, named when one of them is found
/// instead. `Ok(None)` when every copy is intact; otherwise the first bad place and what it
/// holds.
pub fn verify(
    target: &Path,
    placement: &Placement,
    expected: &Marker,
    others: &[&Marker],
) -> io::Result<Option<(String, Mismatch)>> {
    let want = fnv1a64(&expected.bytes);
    for (offset, place) in placement.places() {
        let found = match placement {
            Placement::File => match std::fs::read(marker_file(target)) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            },
            Placement::Block { .. } => read_at(target, offset)?,
        };
        let mismatch = match found {
            None => Some(Mismatch::Missing),
            Some(bytes) if fnv1a64(&bytes) == want && bytes.len() == MARKER_LEN => None,
            Some(bytes) if bytes.iter().all(|b| *b == 0) => Some(Mismatch::Blank),
            Some(bytes) => Some(match others.iter().find(|m| m.bytes == bytes) {
                Some(m) => Mismatch::Other(m.label.clone()),
                None => Mismatch::Differs(
                    bytes.iter().zip(&expected.bytes).position(|(a, b)| a != b).unwrap_or(bytes.len().min(MARKER_LEN)),
                ),
            }),
        };
        if let Some(m) = mismatch {
            return Ok(Some((place, m)));
        }
    }
    Ok(None)
}

/// The 4 KiB at `offset` of a block target; `None` when the target ends before them.
fn read_at(target: &Path, offset: u64) -> io::Result<Option<Vec<u8>>> {
    let file = File::open(target)?;
    let mut buf = vec![0u8; MARKER_LEN];
    let mut done = 0;
    while done < MARKER_LEN {
        let n = file.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok((done == MARKER_LEN).then_some(buf))
}

/// Removes a marker: the marker file of a mount target (already gone is fine), or zeroes
/// the marker's places on a block target.
pub fn remove(target: &Path, placement: &Placement) -> io::Result<()> {
    match placement {
        Placement::File => match std::fs::remove_file(marker_file(target)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Placement::Block { tail } => {
            let file = OpenOptions::new().write(true).open(target)?;
            let zeros = vec![0u8; MARKER_LEN];
            file.write_all_at(&zeros, 0)?;
            file.write_all_at(&zeros, *tail)?;
            file.sync_all()
        }
    }
}

/// Tries to write into a read-only publication without changing anything that is there: a
/// new file beside the marker of a mount target (removed again if it could be made), or the
/// first marker bytes rewritten unchanged on a block target. The error of the refused write.
pub fn try_write(target: &Path, block: bool) -> io::Result<()> {
    if block {
        let file = OpenOptions::new().read(true).write(true).open(target)?;
        let mut first = vec![0u8; 512];
        let n = file.read_at(&mut first, 0)?;
        file.write_all_at(&first[..n], 0)
    } else {
        let probe = target.join(format!("{MARKER_FILE}-write-probe"));
        OpenOptions::new().write(true).create_new(true).open(&probe)?;
        std::fs::remove_file(&probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_seeded_distinct_and_digested() {
        let a = Marker::new(7, "scn", "A");
        assert_eq!(a, Marker::new(7, "scn", "A"));
        assert_eq!(a.bytes.len(), MARKER_LEN);
        assert_ne!(a.bytes, Marker::new(8, "scn", "A").bytes);
        assert_ne!(a.bytes, Marker::new(7, "scn", "B").bytes);
        assert_ne!(a.bytes, Marker::new(7, "other", "A").bytes);
        // The FNV-1a reference values.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(a.digest().len(), 16);
    }

    #[test]
    fn a_mount_marker_round_trips_and_says_what_replaced_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Marker::new(1, "s", "A"), Marker::new(1, "s", "B"));
        assert_eq!(verify(dir.path(), &Placement::File, &a, &[]).unwrap().unwrap().1, Mismatch::Missing);
        let at = write(dir.path(), false, &a, None).unwrap();
        assert_eq!(verify(dir.path(), &at, &a, &[&b]).unwrap(), None);
        write(dir.path(), false, &b, Some(&at)).unwrap();
        let (place, found) = verify(dir.path(), &at, &a, &[&b]).unwrap().unwrap();
        assert_eq!(found, Mismatch::Other("B".into()));
        assert_eq!(found.describe(&place, &a), "file csi-conform-marker holds marker B instead of marker A");
        let mut bytes = a.bytes.clone();
        bytes[100] ^= 1;
        std::fs::write(dir.path().join(MARKER_FILE), &bytes).unwrap();
        assert_eq!(verify(dir.path(), &at, &a, &[&b]).unwrap().unwrap().1, Mismatch::Differs(100));
        try_write(dir.path(), false).unwrap();
        remove(dir.path(), &at).unwrap();
        remove(dir.path(), &at).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left behind");
    }

    #[test]
    fn a_block_marker_sits_at_both_ends_and_is_read_where_it_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dev");
        File::create(&file).unwrap().set_len(1 << 20).unwrap();
        let a = Marker::new(1, "s", "A");
        let at = write(&file, true, &a, None).unwrap();
        assert_eq!(at, Placement::Block { tail: (1 << 20) - 4096 });
        File::options().write(true).open(&file).unwrap().set_len(2 << 20).unwrap();
        assert_eq!(block_size(&file).unwrap(), 2 << 20);
        assert_eq!(verify(&file, &at, &a, &[]).unwrap(), None, "the tail stays where it was written");
        File::options().write(true).open(&file).unwrap().write_all_at(&[0u8; 4096], (1 << 20) - 4096).unwrap();
        let (place, found) = verify(&file, &at, &a, &[]).unwrap().unwrap();
        assert_eq!((place.as_str(), found), ("byte 1044480 (the last 4 KiB)", Mismatch::Blank));
        File::options().write(true).open(&file).unwrap().set_len(4096).unwrap();
        assert_eq!(verify(&file, &at, &a, &[]).unwrap().unwrap().1, Mismatch::Missing);
        remove(&file, &Placement::Block { tail: 4096 }).unwrap();
        assert!(std::fs::read(&file).unwrap().iter().all(|b| *b == 0));
        assert!(fs_size(dir.path()).unwrap() > 0);
    }

    /// A block target must hold both copies (8 KiB): one byte less is refused with its size,
    /// exactly 8 KiB puts the tail right after the head. A marker written again where an
    /// earlier one was (`at`) goes to that tail, not to the end of the grown target.
    #[test]
    fn a_block_marker_needs_room_for_both_copies_and_is_rewritten_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dev");
        let (a, b) = (Marker::new(1, "s", "A"), Marker::new(1, "s", "B"));
        File::create(&file).unwrap().set_len(2 * MARKER_LEN as u64 - 1).unwrap();
        let err = write(&file, true, &a, None).unwrap_err();
        assert_eq!(err.to_string(), "the block volume holds only 8191 bytes");
        File::options().write(true).open(&file).unwrap().set_len(2 * MARKER_LEN as u64).unwrap();
        assert_eq!(write(&file, true, &a, None).unwrap(), Placement::Block { tail: 4096 });
        assert_eq!(std::fs::read(&file).unwrap(), [a.bytes.clone(), a.bytes.clone()].concat());

        File::options().write(true).open(&file).unwrap().set_len(1 << 20).unwrap();
        let at = write(&file, true, &a, None).unwrap();
        File::options().write(true).open(&file).unwrap().set_len(2 << 20).unwrap();
        assert_eq!(write(&file, true, &b, Some(&at)).unwrap(), at, "the earlier placement is kept");
        assert_eq!(verify(&file, &at, &b, &[&a]).unwrap(), None);
        let bytes = std::fs::read(&file).unwrap();
        assert!(bytes[(2 << 20) - MARKER_LEN..].iter().all(|b| *b == 0), "nothing written at the grown end");
    }

    /// A tail cut short (the target ends inside the last copy) is missing: the bytes before the
    /// tail are never read in its place.
    #[test]
    fn a_tail_cut_short_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dev");
        File::create(&file).unwrap().set_len(1 << 20).unwrap();
        let a = Marker::new(1, "s", "A");
        let at = write(&file, true, &a, None).unwrap();
        let Placement::Block { tail } = at else { panic!("{at:?}") };
        File::options().write(true).open(&file).unwrap().set_len(tail + MARKER_LEN as u64 / 2).unwrap();
        let (place, found) = verify(&file, &at, &a, &[]).unwrap().unwrap();
        assert_eq!((place.as_str(), found), ("byte 1044480 (the last 4 KiB)", Mismatch::Missing));
    }

    /// Only a marker that is not there is "missing": any other error reading or removing it
    /// (here the marker's path is a directory) is an error, never a verdict about the data.
    #[test]
    fn errors_other_than_not_found_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(MARKER_FILE)).unwrap();
        let a = Marker::new(1, "s", "A");
        assert!(verify(dir.path(), &Placement::File, &a, &[]).is_err());
        assert!(remove(dir.path(), &Placement::File).is_err());
        assert!(dir.path().join(MARKER_FILE).is_dir());
    }

    /// The write probe changes nothing where it may write, and reports the error where it
    /// may not (here: targets that cannot be opened for writing).
    #[test]
    fn the_write_probe_leaves_things_as_they_were_and_reports_a_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dev");
        let a = Marker::new(1, "s", "A");
        std::fs::write(&file, &a.bytes).unwrap();
        try_write(&file, true).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), a.bytes);
        try_write(dir.path(), false).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the probe file is gone");
        let gone = dir.path().join("gone");
        assert_eq!(try_write(&gone, false).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(try_write(&gone, true).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(try_write(dir.path(), true).is_err(), "a directory is no block target");
    }

    /// The file system's size is its blocks, so at least what a file on it holds.
    #[test]
    fn a_file_system_is_at_least_as_large_as_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, vec![7u8; 64 << 10]).unwrap();
        File::open(&file).unwrap().sync_all().unwrap();
        assert!(fs_size(dir.path()).unwrap() >= 64 << 10);
    }
}
