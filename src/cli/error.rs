//! The command line's error type and its documented exit codes.

/// Every run passed (or only skipped/warned without `--strict`).
pub const EXIT_OK: u8 = 0;
/// At least one finding failed.
pub const EXIT_FINDINGS: u8 = 1;
/// Bad usage, configuration, suite, or no connection to the plugin.
pub const EXIT_USAGE: u8 = 2;

/// An error at the command line's edge: what to print, and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// The message, already readable.
    pub message: String,
    /// The process exit code.
    pub code: u8,
}

impl CliError {
    /// A usage, configuration or connection error (exit code 2).
    pub fn usage(message: impl std::fmt::Display) -> Self {
        CliError {
            message: message.to_string(),
            code: EXIT_USAGE,
        }
    }
}
