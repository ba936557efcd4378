//! The last line of defence for secrets in free text: a [`Scrubber`] holds every sensitive
//! value a process has handled (the secrets file's values, and the values of fields the CSI
//! descriptor marks sensitive that went over the wire, mount flags with data included) and
//! blanks them wherever they appear in text, in every encoding a plugin may send them back
//! in: finding messages, a plugin's error messages and contexts, cleanup output, every log
//! line (see [`ScrubbingWriter`]), and every string of a report before it is written
//! ([`Scrubber::clean`]).
//!
//! Structured output is redacted at the source, from the descriptor
//! ([`crate::proto::redacted`]); this catches what escapes structure: a plugin that echoes a
//! secret in its error text or in a context map, an assertion message that quotes a response,
//! a dependency that logs more than it should at trace level.
//!
//! # What is blanked, and the rule for short values
//!
//! For each held value: the value itself; its JSON escapes (plain, ASCII-only `\uXXXX`, Go's
//! HTML-safe `\u003c`, and JSON inside JSON), Rust's `{:?}` escapes, YAML's single- and
//! double-quoted escapes, HTML/XML escapes; its URL encoding (`%XX` upper or lower case,
//! space as `%20` or `+`); its hex (lower and upper case); and its base64 (standard and
//! url-safe, padded or not) at each of the three byte alignments it can have inside a larger
//! encoded text: what is blanked there is the run of base64 characters the value's bytes alone
//! determine, so it is found whatever surrounds it.
//!
//! A prefix of any of these forms, of at least [`MIN_LEN`] bytes, that ends where text was
//! shortened (`...` or `…`, after an optional closing quote) is blanked too: a value cut
//! before it was scrubbed leaves its head exposed otherwise.
//!
//! Values shorter than [`MIN_LEN`] characters are never scrubbed from free text: blanking
//! every `ro` or `1` would make all output unreadable, and a value that short hides nothing
//! (it is guessed in a few thousand tries). They are still redacted wherever they are field
//! values (the request dumps of every finding and log line). A base64 fragment is blanked only
//! when it is at least [`MIN_ENCODED`] characters long (values of 5 bytes and more; a 4-byte
//! value's base64 determines at most 5 characters, which occur by chance in any base64 text).

use std::{
    borrow::Cow,
    io::{self, Write},
    sync::{Arc, RwLock},
};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

use crate::proto::REDACTED;

/// The shortest value that is scrubbed from free text, in characters (and the shortest cut
/// prefix that is, in bytes).
pub const MIN_LEN: usize = 4;

/// The shortest base64 fragment that is scrubbed, in characters.
pub const MIN_ENCODED: usize = 6;

/// The most characters any one string of a report keeps ([`Scrubber::clean`]); a plugin's
/// 3 MB name or message is cut to this, after it has been scrubbed.
pub const REPORT_STRING_MAX: usize = 4096;

#[derive(Default)]
struct Held {
    /// The values, as given.
    values: Vec<String>,
    /// Every form of every value (see the module documentation), longest first.
    forms: Vec<String>,
    /// Finds every form in one pass.
    matcher: Option<AhoCorasick>,
}

/// A shared, growing set of values never to show. Cheap to clone (clones share the set).
#[derive(Clone, Default)]
pub struct Scrubber {
    held: Arc<RwLock<Held>>,
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
            let known = self.held.read().unwrap_or_else(|p| p.into_inner());
            let mut fresh: Vec<String> = Vec::new();
            for v in values {
                let v = v.as_ref();
                if v.chars().count() >= MIN_LEN && !known.values.iter().any(|k| k == v) && !fresh.iter().any(|k| k == v) {
                    fresh.push(v.to_owned());
                }
            }
            fresh
        };
        if fresh.is_empty() {
            return;
        }
        let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
        for v in fresh {
            if held.values.contains(&v) {
                continue;
            }
            for form in forms_of(&v) {
                if !held.forms.contains(&form) {
                    held.forms.push(form);
                }
            }
            held.values.push(v);
        }
        // Longest first, so that a value containing another is blanked whole.
        held.forms.sort_by_key(|v| std::cmp::Reverse(v.len()));
        held.matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&held.forms).ok();
    }

    /// How many values are held.
    pub fn len(&self) -> usize {
        self.held.read().unwrap_or_else(|p| p.into_inner()).values.len()
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `text` with every held value, in every form, replaced by [`REDACTED`].
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let held = self.held.read().unwrap_or_else(|p| p.into_inner());
        let Some(matcher) = &held.matcher else { return Cow::Borrowed(text) };
        let mut out = Cow::Borrowed(text);
        if matcher.is_match(text) {
            out = Cow::Owned(matcher.replace_all(text, &vec![REDACTED; held.forms.len()]));
        }
        if let Some(cut) = blank_cut_prefixes(&out, &held.forms) {
            out = Cow::Owned(cut);
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

    /// A copy of `item` (a report) in which every string is scrubbed and then cut to
    /// [`REPORT_STRING_MAX`] characters: what reports repeat is bounded, and no value is cut
    /// before it is scrubbed. Map keys are scrubbed but never cut. `None` if the scrubbed
    /// copy no longer reads as the type (a held value that spells one of its enum words).
    pub fn clean<T>(&self, item: &T) -> Option<T>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        let mut value = serde_json::to_value(item).ok()?;
        self.clean_value(&mut value);
        serde_json::from_value(value).ok()
    }

    fn clean_value(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                let scrubbed = self.scrub(s);
                let capped = cap(&scrubbed, REPORT_STRING_MAX).into_owned();
                *s = capped;
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.clean_value(v)),
            serde_json::Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.clean_value(&mut v);
                    map.insert(self.scrub(&k).into_owned(), v);
                }
            }
            _ => {}
        }
    }

    /// A `tracing_subscriber` writer factory: every log line goes to stderr scrubbed.
    pub fn stderr_writer(&self) -> ScrubbingMakeWriter {
        ScrubbingMakeWriter { scrubber: self.clone() }
    }
}

/// `text` cut to at most `max` characters, saying how much was cut. Cut only text that has
/// been scrubbed: a cut value is no longer found by the scrubber in full.
pub fn cap(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}… ({} more bytes cut)", &text[..end], text.len() - end)),
    }
}

/// Every form in which `value` may come back (see the module documentation).
fn forms_of(value: &str) -> Vec<String> {
    let json = json_escape(value);
    let go_json = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    let mut forms = vec![
        value.to_owned(),
        json.clone(),
        json_ascii(value, false),
        json_ascii(value, true),
        go_json,
        json_escape(&json),
        format!("{value:?}").trim_matches('"').to_owned(),
        value.replace('\'', "''"),
        yaml_double(value),
        html_escape(value),
        html_escape(&json),
    ];
    for upper in [true, false] {
        for plus in [true, false] {
            forms.push(url_encode(value, upper, plus));
        }
    }
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    forms.push(hex.to_ascii_uppercase());
    forms.push(hex);
    for engine in [base64::engine::general_purpose::STANDARD_NO_PAD, base64::engine::general_purpose::URL_SAFE_NO_PAD] {
        for align in 0..3 {
            let core = base64_core(value.as_bytes(), align, &engine);
            if core.len() >= MIN_ENCODED {
                forms.push(core);
            }
        }
    }
    forms.retain(|f| f.len() >= MIN_LEN);
    forms.sort();
    forms.dedup();
    forms
}

fn json_escape(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_owned()
}

/// JSON with every non-ASCII character as `\uXXXX` (surrogate pairs above the BMP), as
/// Python's `json.dumps` writes it.
fn json_ascii(value: &str, upper: bool) -> String {
    let mut out = String::new();
    for c in json_escape(value).chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            if upper {
                out.push_str(&format!("\\u{unit:04X}"));
            } else {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The inside of YAML's double-quoted form of `value` (as serde_yaml writes it), or the value
/// when it would be written otherwise.
fn yaml_double(value: &str) -> String {
    let text = serde_yaml::to_string(value).unwrap_or_default();
    let line = text.trim_end_matches('\n');
    match line.strip_prefix('"').and_then(|l| l.strip_suffix('"')) {
        Some(inner) => inner.to_owned(),
        None => value.to_owned(),
    }
}

fn html_escape(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn url_encode(value: &str, upper: bool, plus_for_space: bool) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            b' ' if plus_for_space => out.push('+'),
            _ if upper => out.push_str(&format!("%{b:02X}")),
            _ => out.push_str(&format!("%{b:02x}")),
        }
    }
    out
}

/// The base64 characters that `bytes` alone determine when they start `align` bytes into a
/// 3-byte group of a larger encoded text.
fn base64_core(bytes: &[u8], align: usize, engine: &base64::engine::GeneralPurpose) -> String {
    let mut padded = vec![0u8; align];
    padded.extend_from_slice(bytes);
    padded.extend_from_slice(&[0, 0]);
    let encoded = engine.encode(&padded);
    let (start_bit, end_bit) = (8 * align, 8 * (align + bytes.len()));
    let (first, last) = (start_bit.div_ceil(6), end_bit / 6);
    encoded.get(first..last.max(first)).unwrap_or_default().to_owned()
}

/// Blanks every prefix (of at least [`MIN_LEN`] bytes) of a form that ends where `text` was
/// shortened: right before `...` or `…`, or before a quote that precedes one. `None` when
/// there is none.
fn blank_cut_prefixes(text: &str, forms: &[String]) -> Option<String> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let ellipses = text.match_indices("...").chain(text.match_indices('…')).map(|(i, _)| i);
    for at in ellipses {
        let mut ends = vec![at];
        if at > 0 && matches!(text.as_bytes()[at - 1], b'"' | b'\'') {
            ends.push(at - 1);
        }
        for end in ends {
            let head = &text.as_bytes()[..end];
            let longest = forms
                .iter()
                .filter_map(|f| {
                    let f = f.as_bytes();
                    (MIN_LEN..=f.len().min(end)).rev().find(|&k| head[end - k] == f[0] && head[end - k..] == f[..k])
                })
                .max();
            if let Some(k) = longest
                && text.is_char_boundary(end - k)
            {
                ranges.push((end - k, end));
            }
        }
    }
    if ranges.is_empty() {
        return None;
    }
    ranges.sort();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (start, end) in ranges {
        if end <= from {
            continue;
        }
        out.push_str(&text[from..start.max(from)]);
        out.push_str(REDACTED);
        from = end;
    }
    out.push_str(&text[from..]);
    Some(out)
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
#[path = "scrub_tests.rs"]
mod tests;
