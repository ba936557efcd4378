//! Writing report files: parent directories created, each file written to a temporary file in
//! its own directory, synced, and renamed over the target, so a crash or a full disk leaves
//! either the old report or the new one, never half of one.

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
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), ReportError> {
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

#[cfg(unix)]
fn set_readable(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}
