//! The errors of loading a suite or a request: [`LoadError`] (one problem at `file:line:col`)
//! and [`LoadErrors`] (every problem of a file).

use std::fmt;

use crate::yaml::Pos;

/// One problem in a suite (or request) text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoadError {
    /// The file.
    pub origin: String,
    /// Where in it (line 0 when the problem is the file as a whole).
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

impl LoadError {
    /// A problem at a position.
    pub fn new(origin: &str, pos: Pos, message: impl Into<String>) -> Self {
        LoadError { origin: origin.to_owned(), pos, message: message.into() }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pos.line == 0 {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.origin, self.pos.line, self.pos.col, self.message)
        }
    }
}

/// Every problem found, one `file:line:col: message` per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadErrors(pub Vec<LoadError>);

impl fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}
