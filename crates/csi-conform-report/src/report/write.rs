//! Writing report files: parent directories created, each file written to a temporary file in
//! its own directory, synced, and renamed over the target, so a crash or a full disk leaves
//! either the old report or the new one, never half of one. A target that is not a regular
//! file (`/dev/null`, `/dev/stdout`, a FIFO, a symbolic link) is written through, never
//! replaced.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use super::{json::to_json, junit::to_junit_xml, model::RunReport};

/// Why a report file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory to hold a report could not be created.
    #[error("cannot create directory {} for a report: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The report itself could not be written or put in place.
    #[error("cannot write report {}: {source}", path.display())]
    Write {
        /// The report file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Writes the JUnit XML and/or the JSON report of `report` to the paths given.
pub fn write_reports(
    report: &RunReport,
    junit: Option<&Path>,
    json: Option<&Path>,
) -> Result<(), ReportError> {
    if let Some(path) = junit {
        write_atomically(path, &to_junit_xml(report))?;
    }
    if let Some(path) = json {
        write_atomically(path, &to_json(report))?;
    }
    Ok(())
}

/// Writes `contents` to `path` through a temporary file in the same directory and a rename.
///
/// Only a regular file (or a path where nothing is yet) is replaced so. Anything else at `path`
/// is opened and written through: renaming over `/dev/null` as root would put a regular file
/// in the device's place (every later reader of `/dev/null` would read the report), and
/// renaming over a symbolic link (`/dev/stdout`, `latest.xml -> run-5.xml`) would replace the
/// link instead of writing where it points.
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), ReportError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
        return write_through(path, contents);
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir { path: dir.to_owned(), source })?;
    let write_err = |source| ReportError::Write { path: path.to_owned(), source };

    let mut file = tempfile::Builder::new()
        .prefix(".csi-conform-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(write_err)?;
    file.write_all(contents.as_bytes()).map_err(write_err)?;
    // A report is no secret (everything in it is redacted) and CI uploaders may run as another
    // user: readable by all, unlike the temporary file's private default.
    set_readable(file.as_file()).map_err(write_err)?;
    file.as_file().sync_all().map_err(write_err)?;
    file.persist(path).map_err(|e| write_err(e.error))?;
    // Make the rename itself durable; not every file system can sync a directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `contents` into what `path` names (a device, a FIFO, or a symbolic link's target),
/// leaving `path` itself as it is. A regular file reached through a link is truncated first.
fn write_through(path: &Path, contents: &str) -> Result<(), ReportError> {
    let write_err = |source| ReportError::Write { path: path.to_owned(), source };
    let regular = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_file());
    let mut file = std::fs::OpenOptions::new().write(true).truncate(regular).open(path).map_err(write_err)?;
    file.write_all(contents.as_bytes()).map_err(write_err)?;
    file.flush().map_err(write_err)
}

#[cfg(unix)]
fn set_readable(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt as _;

    use super::*;

    #[test]
    fn a_regular_file_is_replaced_and_a_missing_one_made_with_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports/junit.xml");
        write_atomically(&path, "first, and longer").unwrap();
        write_atomically(&path, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, ["junit.xml"], "no temporary file stays behind");
    }

    /// `latest.xml -> run-5.xml`: the link stays a link, and the file it names gets the
    /// report (shorter than what was there: truncated, not overwritten in place).
    #[test]
    fn a_symbolic_link_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run-5.xml");
        std::fs::write(&target, "an older and much longer report").unwrap();
        let link = dir.path().join("latest.xml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    /// What `--junit /dev/null` and `--junit >(upload)` meet: a device or a pipe stays what it
    /// is (renaming over `/dev/null` as root replaced the device with a regular file), and a
    /// FIFO's reader gets the report.
    #[test]
    fn a_fifo_is_written_through_and_stays_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("report.fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomically(&fifo, "<testsuites/>").unwrap();
        // First, so that a replaced FIFO fails the test rather than leave it waiting on a
        // reader no writer will ever meet.
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
        assert_eq!(reader.join().unwrap(), "<testsuites/>");
    }
}
