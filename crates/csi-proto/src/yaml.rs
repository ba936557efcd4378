//! A YAML document as a tree of nodes that remember where they were written (line and column),
//! built from `saphyr-parser` events. Everything that reads suites, configuration, secrets and
//! requests works on this tree so that every error can name `file:line:column`.
//!
//! Hostile input is refused while it is read, in time linear in its size: a file over
//! [`MAX_SOURCE_BYTES`] is not read at all, bytes that are not UTF-8 are named by line and
//! byte ([`read_source`]), nesting deeper than [`MAX_DEPTH`] stops the parse at the level that
//! breaks it, and more than [`MAX_NODES`] nodes (aliases expanded) stop it at the node that
//! does. [`check_limits`] applies the same bounds to text another parser will read.

use std::{collections::HashMap, fmt};

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A position in a source text: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the node starts.
    pub pos: Pos,
    /// What it is.
    pub kind: NodeKind,
}

/// The three shapes of YAML, scalars kept as written.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A scalar as written, with whether it was quoted (quoted scalars are always strings) and
    /// its tag (`binary`, `str`, ... for `!!binary`, `!!str`).
    Scalar {
        /// The text.
        text: String,
        /// Whether it was quoted or a block scalar (then it is a string, never a number).
        quoted: bool,
        /// The core-schema tag suffix, if one was written.
        tag: Option<String>,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in written order (duplicate keys are a parse error).
    Map(Vec<(Node, Node)>),
}

/// A scalar read by the YAML 1.2 core schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Plain<'a> {
    /// `~`, `null`, or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer (decimal, `0x`, `0o`).
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// Anything else, and every quoted scalar.
    Str(&'a str),
}

/// A YAML syntax error at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub message: String,
}

/// The most nodes a document may hold, aliases expanded (alias bombs).
pub const MAX_NODES: usize = 200_000;
/// The deepest nesting of sequences and mappings a document may have.
pub const MAX_DEPTH: usize = 64;
/// The largest YAML input read, in bytes.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// Why a YAML source could not be read as text. Its `Display` names no file: callers put the
/// file (and, for [`SourceError::NotUtf8`], [`SourceError::pos`]) in front.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file is larger than [`MAX_SOURCE_BYTES`].
    #[error("it is larger than the {MAX_SOURCE_BYTES}-byte limit of a YAML input")]
    TooLarge,
    /// A byte sequence that is not UTF-8.
    #[error("invalid UTF-8 at byte {col} of line {line} (byte {offset} of the file)")]
    NotUtf8 {
        /// 1-based line.
        line: usize,
        /// 1-based byte of the line.
        col: usize,
        /// 0-based byte offset in the file.
        offset: usize,
    },
}

impl SourceError {
    /// Where in the file the error is, when it is in the text.
    pub fn pos(&self) -> Option<Pos> {
        match self {
            SourceError::NotUtf8 { line, col, .. } => Some(Pos { line: *line, col: *col }),
            _ => None,
        }
    }
}

/// Reads a YAML input file as text: at most [`MAX_SOURCE_BYTES`], and UTF-8 (an invalid byte
/// is named by line and byte).
pub fn read_source(path: &std::path::Path) -> Result<String, SourceError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(SourceError::TooLarge);
    }
    decode_source(bytes)
}

/// `bytes` as text, or where the first byte that is not UTF-8 is.
pub fn decode_source(bytes: Vec<u8>) -> Result<String, SourceError> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..offset];
        let line = 1 + before.iter().filter(|b| **b == b'\n').count();
        let col = 1 + offset - before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        SourceError::NotUtf8 { line, col, offset }
    })
}

/// Checks `text` against the bounds of this module (nesting, node count) without building a
/// tree, in one linear pass: for inputs another parser reads. A syntax error is returned as
/// [`parse`] returns it (the scanner's own nesting limit is one).
pub fn check_limits(text: &str) -> Result<(), SyntaxError> {
    let mut depth = 0usize;
    let mut nodes = 0usize;
    let mut sizes: HashMap<usize, usize> = HashMap::new();
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| SyntaxError {
            pos: Pos { line: e.marker().line(), col: e.marker().col() + 1 },
            message: format!("invalid YAML: {}", e.info()),
        })?;
        let pos = pos_of(&span);
        let added = match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(SyntaxError { pos, message: format!("nesting deeper than {MAX_DEPTH} levels") });
                }
                open.push((anchor, nodes));
                1
            }
            Event::SequenceEnd | Event::MappingEnd => {
                depth = depth.saturating_sub(1);
                if let Some((anchor, start)) = open.pop()
                    && anchor > 0
                {
                    sizes.insert(anchor, nodes - start);
                }
                0
            }
            Event::Scalar(_, _, anchor, _) => {
                if anchor > 0 {
                    sizes.insert(anchor, 1);
                }
                1
            }
            Event::Alias(id) => sizes.get(&id).copied().unwrap_or(1),
            _ => 0,
        };
        nodes = nodes.saturating_add(added);
        if nodes > MAX_NODES {
            return Err(too_large(pos));
        }
    }
    Ok(())
}

fn too_large(pos: Pos) -> SyntaxError {
    SyntaxError { pos, message: format!("the document is too large (more than {MAX_NODES} nodes, aliases expanded)") }
}

impl Node {
    /// A node of this kind at `pos`.
    pub fn new(pos: Pos, kind: NodeKind) -> Self {
        Node { pos, kind }
    }

    /// A plain string scalar (used for synthesised nodes).
    pub fn string(pos: Pos, text: impl Into<String>) -> Self {
        Node::new(pos, NodeKind::Scalar { text: text.into(), quoted: true, tag: None })
    }

    /// The scalar read by the core schema; `None` for sequences and mappings.
    pub fn plain(&self) -> Option<Plain<'_>> {
        match &self.kind {
            NodeKind::Scalar { text, quoted, tag } => Some(read_plain(text, *quoted, tag.as_deref())),
            _ => None,
        }
    }

    /// The scalar's text, whatever its type.
    pub fn scalar_text(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The text when the node is a string (quoted, or plain and not a number/bool/null).
    pub fn as_str(&self) -> Option<&str> {
        match self.plain()? {
            Plain::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the node is `null` / `~` / empty.
    pub fn is_null(&self) -> bool {
        matches!(self.plain(), Some(Plain::Null))
    }

    /// The mapping's entries.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            NodeKind::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The sequence's items.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// A word for the node's type, for error messages (`a string`, `a mapping`...).
    pub fn describe(&self) -> &'static str {
        match &self.kind {
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
            NodeKind::Scalar { .. } => match self.plain() {
                Some(Plain::Null) => "null",
                Some(Plain::Bool(_)) => "a boolean",
                Some(Plain::Int(_)) => "an integer",
                Some(Plain::Float(_)) => "a number",
                _ => "a string",
            },
        }
    }
}

fn read_plain<'a>(text: &'a str, quoted: bool, tag: Option<&str>) -> Plain<'a> {
    if quoted || matches!(tag, Some("str" | "binary")) {
        return Plain::Str(text);
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "true" | "True" | "TRUE" => return Plain::Bool(true),
        "false" | "False" | "FALSE" => return Plain::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Plain::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Plain::Int(i);
    }
    let looks_numeric = text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && text.bytes().any(|b| b.is_ascii_digit());
    if looks_numeric && let Ok(f) = text.parse::<f64>() {
        return Plain::Float(f);
    }
    Plain::Str(text)
}

/// Parses a YAML core-schema integer: `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`.
pub fn parse_int(text: &str) -> Option<i128> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i128::from_str_radix(hex, 16).ok().filter(|_| !hex.starts_with(['+', '-']));
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return i128::from_str_radix(oct, 8).ok().filter(|_| !oct.starts_with(['+', '-']));
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn pos_of(span: &Span) -> Pos {
    Pos { line: span.start.line(), col: span.start.col() + 1 }
}

/// A collection being built: its start position, anchor, and what it holds so far.
enum Open {
    Seq(Pos, usize, Vec<Node>),
    Map(Pos, usize, Vec<(Node, Node)>, Option<Node>),
}

struct Builder {
    stack: Vec<Open>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    errors: Vec<SyntaxError>,
    root: Option<Node>,
    documents: usize,
}

impl Builder {
    /// Counts `added` more nodes: each node once, when it is read (a collection when it
    /// opens, an alias for the whole tree it repeats), so the count is linear in the input.
    fn count(&mut self, added: usize, pos: Pos) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(added);
        if self.nodes > MAX_NODES {
            return Err(too_large(pos));
        }
        Ok(())
    }

    fn push(&mut self, node: Node, anchor: usize) -> Result<(), SyntaxError> {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Open::Seq(_, _, items)) => items.push(node),
            Some(Open::Map(_, _, entries, pending)) => match pending.take() {
                None => {
                    if !matches!(node.kind, NodeKind::Scalar { .. }) {
                        self.errors.push(SyntaxError {
                            pos: node.pos,
                            message: format!("mapping keys must be scalars, not {}", node.describe()),
                        });
                    } else if let Some((first, _)) = entries.iter().find(|(k, _)| k.scalar_text() == node.scalar_text())
                    {
                        self.errors.push(SyntaxError {
                            pos: node.pos,
                            message: format!(
                                "duplicate key {:?} (first at line {})",
                                node.scalar_text().unwrap_or_default(),
                                first.pos.line
                            ),
                        });
                    }
                    *pending = Some(node);
                }
                Some(key) => entries.push((key, node)),
            },
        }
        Ok(())
    }

    fn on_event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let pos = pos_of(&span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a file holds one YAML document; remove the second `---`".into(),
                    });
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag = match tag {
                    Some(t) if t.is_yaml_core_schema() => Some(t.suffix.clone()),
                    Some(t) => {
                        let tag = format!("{}{}", t.handle, t.suffix);
                        let hint = if t.handle == "!" {
                            format!("; a negated condition must be quoted: \"{tag}\"")
                        } else {
                            "; only core tags like !!str and !!binary are understood".to_owned()
                        };
                        return Err(SyntaxError { pos, message: format!("unsupported tag {tag}{hint}") });
                    }
                    None => None,
                };
                let quoted = style != ScalarStyle::Plain;
                self.count(1, pos)?;
                self.push(Node::new(pos, NodeKind::Scalar { text: text.into_owned(), quoted, tag }), anchor)?;
            }
            Event::SequenceStart(anchor, _) => self.open(Open::Seq(pos, anchor, Vec::new()), pos)?,
            Event::MappingStart(anchor, _) => self.open(Open::Map(pos, anchor, Vec::new(), None), pos)?,
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Open::Seq(p, a, items)) => (Node::new(p, NodeKind::Seq(items)), a),
                    Some(Open::Map(p, a, entries, _)) => (Node::new(p, NodeKind::Map(entries)), a),
                    None => return Ok(()),
                };
                self.push(node, anchor)?;
            }
            Event::Alias(id) => {
                let Some(repeated) = self.anchors.get(&id).map(count_nodes) else {
                    return Err(SyntaxError { pos, message: "alias to an unknown anchor".into() });
                };
                self.count(repeated, pos)?;
                let mut node = self.anchors[&id].clone();
                node.pos = pos;
                self.push(node, 0)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn open(&mut self, open: Open, pos: Pos) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError { pos, message: format!("nesting deeper than {MAX_DEPTH} levels") });
        }
        self.count(1, pos)?;
        self.stack.push(open);
        Ok(())
    }
}

fn count_nodes(node: &Node) -> usize {
    match &node.kind {
        NodeKind::Scalar { .. } => 1,
        NodeKind::Seq(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        NodeKind::Map(entries) => 1 + entries.iter().map(|(k, v)| count_nodes(k) + count_nodes(v)).sum::<usize>(),
    }
}

/// Parses one YAML document into a positioned tree. An empty document is `Ok(None)`.
/// Returns every duplicate-key error, or the first syntax error.
pub fn parse(text: &str) -> Result<Option<Node>, Vec<SyntaxError>> {
    let mut builder =
        Builder { stack: Vec::new(), anchors: HashMap::new(), nodes: 0, errors: Vec::new(), root: None, documents: 0 };
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let step = next
            .map_err(|e| SyntaxError {
                pos: Pos { line: e.marker().line(), col: e.marker().col() + 1 },
                message: format!("invalid YAML: {}", e.info()),
            })
            .and_then(|(event, span)| builder.on_event(event, span));
        if let Err(e) = step {
            builder.errors.push(e);
            return Err(builder.errors);
        }
    }
    if builder.errors.is_empty() { Ok(builder.root) } else { Err(builder.errors) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_line_and_column() {
        let root = parse("a: 1\nb:\n  - x\n  - 'y'\n").unwrap().unwrap();
        let map = root.as_map().unwrap();
        assert_eq!(map[0].0.pos, Pos { line: 1, col: 1 });
        assert_eq!(map[1].1.pos, Pos { line: 3, col: 3 });
        let items = map[1].1.as_seq().unwrap();
        assert_eq!(items[1].pos, Pos { line: 4, col: 5 });
        assert_eq!(items[1].plain(), Some(Plain::Str("y")));
        assert_eq!(map[0].1.plain(), Some(Plain::Int(1)));
    }

    #[test]
    fn core_schema_scalars_and_quoting() {
        let root = parse("[1, '1', true, ~, 1.5, 0x10, abc, !!str 7, '']").unwrap().unwrap();
        let kinds: Vec<_> = root.as_seq().unwrap().iter().map(|n| n.plain().unwrap()).collect();
        assert_eq!(
            kinds,
            vec![
                Plain::Int(1),
                Plain::Str("1"),
                Plain::Bool(true),
                Plain::Null,
                Plain::Float(1.5),
                Plain::Int(16),
                Plain::Str("abc"),
                Plain::Str("7"),
                Plain::Str(""),
            ]
        );
    }

    #[test]
    fn duplicate_keys_and_syntax_errors_have_positions() {
        let errs = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(errs[0].pos, Pos { line: 3, col: 1 });
        assert!(errs[0].message.contains("duplicate key \"a\""), "{:?}", errs);
        let errs = parse("a: [1, 2\n").unwrap_err();
        assert!(errs[0].message.starts_with("invalid YAML"), "{:?}", errs);
    }

    /// Each node is counted once, however deep it sits: a document of 100,000 scalars 40
    /// levels down is read (counting a node again for every level it closes would make it
    /// 4 million, and refuse it).
    #[test]
    fn nodes_are_counted_once_whatever_their_depth() {
        let depth = 40;
        let text = format!("{}{}{}", "[".repeat(depth), vec!["x"; 100_000].join(","), "]".repeat(depth));
        assert!(parse(&text).is_ok());
        assert!(check_limits(&text).is_ok());
        let over = format!("[{}]", vec!["x"; MAX_NODES + 1].join(","));
        assert!(parse(&over).unwrap_err()[0].message.contains("too large"));
        assert!(check_limits(&over).unwrap_err().message.contains("too large"));
    }

    #[test]
    fn check_limits_bounds_nesting_and_aliases_like_parse() {
        let deep = format!("{}x{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = check_limits(&deep).unwrap_err();
        assert_eq!((err.pos.line, err.pos.col), (1, MAX_DEPTH + 1), "{err:?}");
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8u8 {
            let (prev, next) = ((b'a' + i) as char, (b'a' + i + 1) as char);
            bomb.push_str(&format!("{next}: &{next} [{}]\n", vec![format!("*{prev}"); 10].join(", ")));
        }
        assert!(check_limits(&bomb).unwrap_err().message.contains("too large"));
        assert!(check_limits("a: [1, 2]\nb: {c: d}\n").is_ok());
        assert!(check_limits("a: [1, 2\n").unwrap_err().message.starts_with("invalid YAML"));
    }

    #[test]
    fn aliases_expand_and_bombs_are_refused() {
        let root = parse("a: &x {k: v}\nb: *x\n").unwrap().unwrap();
        assert_eq!(root.as_map().unwrap()[1].1.as_map().unwrap().len(), 1);
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8u8 {
            let prev = (b'a' + i) as char;
            let next = (b'a' + i + 1) as char;
            bomb.push_str(&format!("{next}: &{next} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        let errs = parse(&bomb).unwrap_err();
        assert!(errs[0].message.contains("too large"), "{:?}", errs);
    }
}
