//! The last line of defence for secrets in free text: a [`Scrubber`] holds every sensitive
//! value a process has handled (the secrets file's values, and the values of fields the CSI
//! descriptor marks sensitive that went over the wire) and blanks them wherever they appear
//! in text: finding messages, a plugin's error messages, cleanup output, and every log line
//! (see [`ScrubbingWriter`]).
//!
//! Structured output is redacted at the source, from the descriptor
//! ([`crate::proto::redacted`]); this catches what escapes structure: a plugin that echoes a
//! secret in its error text, an assertion message that quotes a response, a dependency that
//! logs more than it should at trace level.
//!
//! Values shorter than [`MIN_LEN`] characters are not scrubbed from free text: blanking every
//! `ro` or `1` would make all output unreadable, and a value that short hides nothing. They
//! are still redacted wherever they are field values.

use std::{
    borrow::Cow,
    io::{self, Write},
    sync::{Arc, RwLock},
};

use crate::proto::REDACTED;

/// The shortest value that is scrubbed from free text.
pub const MIN_LEN: usize = 4;

/// A shared, growing set of values never to show. Cheap to clone (clones share the set).
#[derive(Clone, Default)]
pub struct Scrubber {
    values: Arc<RwLock<Vec<String>>>,
}

impl std::fmt::Debug for Scrubber {
    /// Shows how many values are held, never the values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber").field("values", &self.len()).finish()
    }
}

impl Scrubber {
    /// An empty scrubber.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds values to hide (short and already-known ones are ignored).
    pub fn add<I, S>(&self, values: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let fresh: Vec<String> = {
            let known = self.values.read().unwrap_or_else(|p| p.into_inner());
            values
                .into_iter()
                .map(|v| v.as_ref().to_owned())
                .filter(|v| v.chars().count() >= MIN_LEN && !known.contains(v))
                .collect()
        };
        if fresh.is_empty() {
            return;
        }
        let mut known = self.values.write().unwrap_or_else(|p| p.into_inner());
        for v in fresh {
            if !known.contains(&v) {
                known.push(v);
            }
        }
        // Longest first, so that a value containing another is blanked whole.
        known.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// How many values are held.
    pub fn len(&self) -> usize {
        self.values.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `text` with every held value replaced by [`REDACTED`].
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let values = self.values.read().unwrap_or_else(|p| p.into_inner());
        let mut out = Cow::Borrowed(text);
        for v in values.iter() {
            if out.contains(v.as_str()) {
                out = Cow::Owned(out.replace(v.as_str(), REDACTED));
            }
        }
        out
    }

    /// Scrubs raw bytes (a log line); text that is not UTF-8 is scrubbed as lossy UTF-8.
    pub fn scrub_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if self.is_empty() {
            return Cow::Borrowed(bytes);
        }
        let text = String::from_utf8_lossy(bytes);
        match self.scrub(&text) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }
    }

    /// A `tracing_subscriber` writer factory: every log line goes to stderr scrubbed.
    pub fn stderr_writer(&self) -> ScrubbingMakeWriter {
        ScrubbingMakeWriter { scrubber: self.clone() }
    }
}

/// Makes a [`ScrubbingWriter`] over stderr per log event.
#[derive(Clone, Debug)]
pub struct ScrubbingMakeWriter {
    scrubber: Scrubber,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbingMakeWriter {
    type Writer = ScrubbingWriter<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbingWriter::new(self.scrubber.clone(), io::stderr())
    }
}

/// Buffers one log event and writes it scrubbed when flushed or dropped, so that a value
/// split across several `write` calls is still caught.
pub struct ScrubbingWriter<W: Write> {
    scrubber: Scrubber,
    inner: W,
    buffer: Vec<u8>,
}

impl<W: Write> ScrubbingWriter<W> {
    /// Wraps `inner`.
    pub fn new(scrubber: Scrubber, inner: W) -> Self {
        ScrubbingWriter { scrubber, inner, buffer: Vec::new() }
    }

    fn emit(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.buffer);
        self.inner.write_all(&self.scrubber.scrub_bytes(&line))?;
        self.inner.flush()
    }
}

impl<W: Write> Write for ScrubbingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()
    }
}

impl<W: Write> Drop for ScrubbingWriter<W> {
    fn drop(&mut self) {
        let _ = self.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_held_values_longest_first_and_ignores_short_ones() {
        let s = Scrubber::new();
        assert!(s.is_empty(), "a new scrubber holds nothing");
        s.add(["hunter2", "hunter2-extended", "ro", "hunter2"]);
        assert_eq!(s.len(), 2, "short and repeated values are not held");
        assert!(!s.is_empty());
        assert_eq!(s.scrub("a hunter2-extended b hunter2 error"), "a <redacted> b <redacted> error");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
        assert_eq!(format!("{s:?}"), "Scrubber { values: 2 }");
    }

    #[test]
    fn the_writer_scrubs_a_value_split_across_writes() {
        let s = Scrubber::new();
        s.add(["Zq7secret"]);
        let mut out = Vec::new();
        {
            let mut w = ScrubbingWriter::new(s.clone(), &mut out);
            w.write_all(b"token=Zq7s").unwrap();
            w.write_all(b"ecret end\n").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "token=<redacted> end\n");
    }

    #[test]
    fn flush_writes_the_buffered_line_scrubbed_while_the_writer_lives() {
        let s = Scrubber::new();
        s.add(["Zq7secret"]);
        let mut w = ScrubbingWriter::new(s, Vec::new());
        w.write_all(b"token=Zq7secret\n").unwrap();
        assert!(w.inner.is_empty(), "nothing reaches the inner writer before the event ends");
        w.flush().unwrap();
        assert_eq!(w.inner, b"token=<redacted>\n", "flush emits the line, scrubbed");
        w.flush().unwrap();
        assert_eq!(w.inner, b"token=<redacted>\n", "a second flush writes nothing again");
    }
}
