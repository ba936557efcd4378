//! Applying the rule table to one answer: a walk over every message of a response (REQUIRED
//! fields, signs, enums, size limits, topology formats) and the checks that compare an answer
//! with its request (capacity ranges, page lengths, SnapshotMetadata streams).

use std::collections::BTreeSet;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

use super::Violation;
use super::table::{Check, RULES, Rule, of};
use crate::proto;

/// The general limit on a string field, in bytes.
pub const STRING_LIMIT: usize = 128;
/// The general limit on a string map (keys and values together), in bytes.
pub const MAP_LIMIT: usize = 4096;
/// How much of a value a violation shows.
const SHOWN: usize = 40;

/// Fields that set their own size limit (message, field, bytes).
const OWN_LIMITS: &[(&str, &str, usize)] = &[("NodeGetInfoResponse", "node_id", 256)];

/// The limit a string field of `message` has: its own, or the general one.
pub fn own_limit(message: &str, field: &str) -> usize {
    OWN_LIMITS
        .iter()
        .find(|(m, f, _)| *m == message && *f == field)
        .map_or(STRING_LIMIT, |(_, _, n)| *n)
}

/// A value as a violation shows it: short, and redacted where the field is sensitive.
pub fn shown(field: Option<&FieldDescriptor>, text: &str) -> String {
    if field.is_some_and(proto::is_sensitive_field) {
        return proto::REDACTED.to_owned();
    }
    if text.len() <= SHOWN {
        return format!("{text:?}");
    }
    let mut cut = SHOWN - 8;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{:?}... ({} bytes)", &text[..cut], text.len())
}

/// The message type's name inside the package: `ListVolumesResponse.Entry`.
fn short_name(message: &DynamicMessage) -> String {
    let full = message.descriptor().full_name().to_owned();
    full.strip_prefix(&format!("{}.", proto::PACKAGE)).unwrap_or(&full).to_owned()
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") }
}

/// What the walk over one answer collects besides violations.
struct Walk<'a> {
    rpc: &'a str,
    out: &'a mut Vec<Violation>,
    /// Topology key prefixes seen (one is allowed per plugin).
    prefixes: BTreeSet<String>,
}

impl Walk<'_> {
    fn push(&mut self, rule: &'static Rule, path: String, value: Option<String>, detail: String) {
        self.out.push(Violation { rule, rpc: self.rpc.to_owned(), path, value, detail });
    }

    fn push_check(&mut self, check: Check, path: String, value: Option<String>, detail: String) {
        if let Some(rule) = of(check) {
            self.push(rule, path, value, detail);
        }
    }

    fn message(&mut self, message: &DynamicMessage, path: &str) {
        let name = short_name(message);
        self.per_message_rows(message, &name, path);
        match name.as_str() {
            "VolumeUsage" => self.usage(message, path),
            "VolumeGroupSnapshot" => self.group(message, path),
            _ => {}
        }
        for (field, value) in message.fields() {
            let at = join(path, field.name());
            match value {
                Value::String(s) => self.string(&name, &field, &at, s),
                Value::Message(m) => self.message(m, &at),
                Value::List(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let at = format!("{at}[{i}]");
                        match item {
                            Value::String(s) => self.string(&name, &field, &at, s),
                            Value::Message(m) => self.message(m, &at),
                            _ => {}
                        }
                    }
                }
                Value::Map(map) => self.map(&name, &field, &at, map),
                _ => {}
            }
        }
    }

    /// The table rows that name this message type: REQUIRED fields, signs, enums.
    fn per_message_rows(&mut self, message: &DynamicMessage, name: &str, path: &str) {
        for rule in RULES {
            match rule.check {
                Check::Required { rpc, message: m, field }
                    if m == name && rpc.is_none_or(|r| r == self.rpc) =>
                {
                    let Some(f) = message.descriptor().get_field_by_name(field) else { continue };
                    if !message.has_field(&f) {
                        let what = if f.is_list() || f.is_map() {
                            "has no element"
                        } else if matches!(f.kind(), Kind::Message(_)) {
                            "is missing"
                        } else {
                            "is empty"
                        };
                        self.push(rule, join(path, field), None, format!("{} {what}", join(path, field)));
                    }
                }
                Check::NonNegative { message: m, field } if m == name => {
                    let Some(f) = message.descriptor().get_field_by_name(field) else { continue };
                    if !message.has_field(&f) {
                        continue;
                    }
                    let n = match &*message.get_field(&f) {
                        Value::I64(n) => *n,
                        Value::I32(n) => i64::from(*n),
                        // google.protobuf.Int64Value
                        Value::Message(w) => w.get_field_by_name("value").and_then(|v| v.as_i64()).unwrap_or(0),
                        _ => 0,
                    };
                    if n < 0 {
                        let at = join(path, field);
                        self.push(rule, at.clone(), Some(n.to_string()), format!("{at} is negative"));
                    }
                }
                Check::KnownEnum { message: m, field } if m == name => {
                    let Some(f) = message.descriptor().get_field_by_name(field) else { continue };
                    let Kind::Enum(e) = f.kind() else { continue };
                    let n = message.get_field(&f).as_enum_number().unwrap_or(0);
                    if n == 0 || e.get_value(n).is_none() {
                        let at = join(path, field);
                        let shown = e.get_value(n).map_or(n.to_string(), |v| v.name().to_owned());
                        self.push(rule, at.clone(), Some(shown), format!("{at} is not a defined unit"));
                    }
                }
                _ => {}
            }
        }
    }

    fn string(&mut self, message: &str, field: &FieldDescriptor, at: &str, s: &str) {
        let free_text = field.name() == "message";
        let limit = own_limit(message, field.name());
        if s.len() > limit {
            let check = if free_text { Check::TextLimit } else { Check::StringLimit };
            let detail = format!("{at} is {} bytes, over the {limit}-byte limit", s.len());
            self.push_check(check, at.to_owned(), Some(shown(Some(field), s)), detail);
        }
    }

    fn map(&mut self, message: &str, field: &FieldDescriptor, at: &str, map: &std::collections::HashMap<MapKey, Value>) {
        let size: usize = map
            .iter()
            .map(|(k, v)| k.as_str().map_or(0, str::len) + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAP_LIMIT {
            let detail = format!("{at} is {size} bytes ({} entries), over the 4 KiB limit", map.len());
            self.push_check(Check::MapLimit, at.to_owned(), None, detail);
        }
        let mut long: Vec<(&str, usize)> = map
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?.len())))
            .filter(|(_, n)| *n > STRING_LIMIT)
            .collect();
        long.sort_unstable();
        if let Some((key, n)) = long.first() {
            let detail = format!("{at}[{key:?}] is {n} bytes, over the 128-byte string limit");
            self.push_check(Check::MapValueLimit, format!("{at}[{key:?}]"), Some(format!("{n} bytes")), detail);
        }
        if message == "Topology" && field.name() == "segments" {
            self.topology(at, map);
        }
    }

    fn topology(&mut self, at: &str, map: &std::collections::HashMap<MapKey, Value>) {
        let mut lower = BTreeSet::new();
        let mut keys: Vec<&str> = map.keys().filter_map(MapKey::as_str).collect();
        keys.sort_unstable();
        for key in keys {
            let value = map.get(&MapKey::String(key.to_owned())).and_then(Value::as_str).unwrap_or("");
            let here = format!("{at}[{key:?}]");
            if let Err(why) = topology_key(key) {
                self.push_check(Check::TopologyKey, here.clone(), Some(shown(None, key)), format!("key {why}"));
            }
            if let Some((prefix, _)) = key.split_once('/') {
                self.prefixes.insert(prefix.to_owned());
            }
            if !lower.insert(key.to_ascii_lowercase()) {
                let detail = format!("two keys of {at} differ only by case ({key:?}); keys are case-insensitive");
                self.push_check(Check::TopologyKey, here.clone(), Some(shown(None, key)), detail);
            }
            if let Err(why) = segment_word(value, "value") {
                self.push_check(Check::TopologyValue, here, Some(shown(None, value)), why);
            }
        }
    }

    fn usage(&mut self, usage: &DynamicMessage, path: &str) {
        let get = |f: &str| usage.get_field_by_name(f).and_then(|v| v.as_i64()).unwrap_or(0);
        let (total, used, available) = (get("total"), get("used"), get("available"));
        if total <= 0 {
            return;
        }
        for (name, n) in [("used", used), ("available", available)] {
            if n > total {
                let detail = format!("{path}.{name} ({n}) is above {path}.total ({total})");
                self.push_check(Check::UsageWithinTotal, join(path, name), Some(n.to_string()), detail);
            }
        }
    }

    fn group(&mut self, group: &DynamicMessage, path: &str) {
        let id = group.get_field_by_name("group_snapshot_id").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let ready = group.get_field_by_name("ready_to_use").and_then(|v| v.as_bool()).unwrap_or(false);
        let members = group.get_field_by_name("snapshots").map(|v| v.into_owned());
        let Some(Value::List(members)) = members else { return };
        for (i, member) in members.iter().enumerate() {
            let Some(member) = member.as_message() else { continue };
            let at = format!("{path}.snapshots[{i}]");
            let named = member.get_field_by_name("group_snapshot_id").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            if !id.is_empty() && !named.is_empty() && named != id {
                let detail = format!("{at}.group_snapshot_id names another group than {id:?}");
                self.push_check(Check::MembersNameGroup, format!("{at}.group_snapshot_id"), Some(shown(None, &named)), detail);
            }
            let member_ready = member.get_field_by_name("ready_to_use").and_then(|v| v.as_bool()).unwrap_or(false);
            if ready && !member_ready {
                let detail = format!("{path}.ready_to_use is true while {at}.ready_to_use is false");
                self.push_check(Check::GroupReady, format!("{path}.ready_to_use"), Some("true".into()), detail);
            }
        }
    }
}

/// A topology key: `[prefix/]name`.
pub fn topology_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    segment_word(name, "name")?;
    if let Some(prefix) = prefix {
        let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let ok_len = !prefix.is_empty() && prefix.len() <= 63;
        let ends = prefix.starts_with(lower_alnum) && prefix.ends_with(lower_alnum);
        let inside = prefix.chars().all(|c| lower_alnum(c) || c == '-' || c == '.');
        let labels = prefix.split('.').all(|l| !l.is_empty() && l.starts_with(lower_alnum) && l.ends_with(lower_alnum));
        if !(ok_len && ends && inside && labels) {
            return Err(format!(
                "prefix {prefix:?} is not a lower-case domain name of at most 63 characters"
            ));
        }
    }
    Ok(())
}

/// A topology key name or value: 1 to 63 characters, alphanumeric at both ends, `-`, `_`,
/// `.` or alphanumerics between.
pub fn segment_word(word: &str, what: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if word.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if word.len() > 63 {
        return Err(format!("{what} is {} characters, over 63", word.len()));
    }
    if !(word.starts_with(alnum) && word.ends_with(alnum)) {
        return Err(format!("{what} {word:?} does not begin and end with an alphanumeric character"));
    }
    if let Some(c) = word.chars().find(|&c| !(alnum(c) || matches!(c, '-' | '_' | '.'))) {
        return Err(format!("{what} {word:?} contains {c:?}"));
    }
    Ok(())
}

/// A plugin name: at most 63 characters, alphanumeric at both ends, dashes, dots and
/// alphanumerics between (empty names are the REQUIRED rule's).
pub fn plugin_name(name: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if name.is_empty() {
        return Ok(());
    }
    if name.len() > 63 {
        return Err(format!("it is {} characters, over 63", name.len()));
    }
    if !(name.starts_with(alnum) && name.ends_with(alnum)) {
        return Err("it does not begin and end with an alphanumeric character".into());
    }
    if let Some(c) = name.chars().find(|&c| !(alnum(c) || c == '-' || c == '.')) {
        return Err(format!("it contains {c:?}"));
    }
    Ok(())
}

fn int(message: &DynamicMessage, path: &[&str]) -> i64 {
    let mut current = message.clone();
    for (i, name) in path.iter().enumerate() {
        let Some(value) = current.get_field_by_name(name) else { return 0 };
        if i + 1 == path.len() {
            return value.as_i64().or_else(|| value.as_i32().map(i64::from)).unwrap_or(0);
        }
        let Some(next) = value.as_message() else { return 0 };
        current = next.clone();
    }
    0
}

fn list(message: &DynamicMessage, name: &str) -> Vec<Value> {
    match message.get_field_by_name(name).map(|v| v.into_owned()) {
        Some(Value::List(items)) => items,
        _ => Vec::new(),
    }
}

fn segments(topology: &Value) -> Vec<(String, String)> {
    let Some(t) = topology.as_message() else { return Vec::new() };
    match t.get_field_by_name("segments").map(|v| v.into_owned()) {
        Some(Value::Map(m)) => m
            .into_iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every rule that looks at a successful answer of `rpc` to `request` (one message, or
/// every message of a stream).
pub fn answer(rpc: &str, request: &DynamicMessage, messages: &[DynamicMessage], out: &mut Vec<Violation>) {
    let mut walk = Walk { rpc, out, prefixes: BTreeSet::new() };
    for m in messages {
        walk.message(m, "");
    }
    if walk.prefixes.len() > 1 {
        let all: Vec<&str> = walk.prefixes.iter().map(String::as_str).collect();
        let detail = format!("topology keys use {} prefixes ({}); one prefix is used on every key", all.len(), all.join(", "));
        walk.push_check(Check::TopologyKey, "accessible_topology".into(), None, detail);
    }
    let Some(first) = messages.first() else { return };
    match rpc {
        "GetPluginInfo" => {
            let name = first.get_field_by_name("name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            if let Err(why) = plugin_name(&name) {
                walk.push_check(Check::PluginName, "name".into(), Some(shown(None, &name)), format!("name {why}"));
            }
        }
        "CreateVolume" => {
            capacity_in_range(&mut walk, request, first);
            requisite_topology(&mut walk, request, first);
        }
        "ControllerExpandVolume" => {
            let (got, asked) = (int(first, &["capacity_bytes"]), int(request, &["capacity_range", "required_bytes"]));
            // A negative capacity is impossible in itself, and said so where it is read.
            if asked > 0 && (0..asked).contains(&got) {
                let detail = format!("capacity_bytes {got} is below the {asked} bytes asked for");
                walk.push_check(Check::ExpandedAtLeast, "capacity_bytes".into(), Some(got.to_string()), detail);
            }
        }
        "ListVolumes" | "ListSnapshots" => {
            let max = int(request, &["max_entries"]);
            let n = list(first, "entries").len();
            if max > 0 && n as i64 > max {
                let rpc = if rpc == "ListVolumes" { "ListVolumes" } else { "ListSnapshots" };
                let detail = format!("the page has {n} entries, more than max_entries {max}");
                walk.push_check(Check::PageWithinMax { rpc }, "entries".into(), Some(n.to_string()), detail);
            }
        }
        "GetMetadataAllocated" | "GetMetadataDelta" => metadata(&mut walk, request, messages),
        _ => {}
    }
}

fn capacity_in_range(walk: &mut Walk<'_>, request: &DynamicMessage, answer: &DynamicMessage) {
    let got = int(answer, &["volume", "capacity_bytes"]);
    let required = int(request, &["capacity_range", "required_bytes"]);
    let limit = int(request, &["capacity_range", "limit_bytes"]);
    let why = if got == 0 {
        None
    } else if required > 0 && got < required {
        Some(format!("volume.capacity_bytes {got} is below required_bytes {required}"))
    } else if limit > 0 && got > limit {
        Some(format!("volume.capacity_bytes {got} is above limit_bytes {limit}"))
    } else {
        None
    };
    if let Some(detail) = why {
        walk.push_check(Check::CapacityInRange, "volume.capacity_bytes".into(), Some(got.to_string()), detail);
    }
}

fn requisite_topology(walk: &mut Walk<'_>, request: &DynamicMessage, answer: &DynamicMessage) {
    let requisite: Vec<Vec<(String, String)>> = request
        .get_field_by_name("accessibility_requirements")
        .and_then(|v| v.as_message().map(|m| list(m, "requisite")))
        .unwrap_or_default()
        .iter()
        .map(segments)
        .collect();
    let reported: Vec<Vec<(String, String)>> = answer
        .get_field_by_name("volume")
        .and_then(|v| v.as_message().map(|m| list(m, "accessible_topology")))
        .unwrap_or_default()
        .iter()
        .map(segments)
        .collect();
    if requisite.is_empty() || reported.is_empty() {
        return;
    }
    let compatible = |a: &Vec<(String, String)>, r: &Vec<(String, String)>| {
        a.iter().all(|(k, v)| r.iter().all(|(rk, rv)| rk != k || rv == v))
    };
    if !reported.iter().any(|a| requisite.iter().any(|r| compatible(a, r))) {
        let detail = "no accessible_topology of the volume matches any requisite topology on the keys both name".to_owned();
        walk.push_check(Check::RequisiteTopology, "volume.accessible_topology".into(), None, detail);
    }
}

fn metadata(walk: &mut Walk<'_>, request: &DynamicMessage, messages: &[DynamicMessage]) {
    let rpc: &'static str = if walk.rpc == "GetMetadataAllocated" { "GetMetadataAllocated" } else { "GetMetadataDelta" };
    let start = int(request, &["starting_offset"]);
    let max = int(request, &["max_results"]);
    let mut kind: Option<i32> = None;
    let mut end: Option<i64> = None;
    let mut reported = (false, false, false);
    for (i, m) in messages.iter().enumerate() {
        let this = m.get_field_by_name("block_metadata_type").and_then(|v| v.as_enum_number()).unwrap_or(0);
        let ranges = list(m, "block_metadata");
        if max > 0 && ranges.len() as i64 > max && !reported.2 {
            reported.2 = true;
            let detail = format!("message {i} carries {} ranges, more than max_results {max}", ranges.len());
            walk.push_check(Check::MetadataMaxResults { rpc }, format!("[{i}].block_metadata"), Some(ranges.len().to_string()), detail);
        }
        if kind.is_some_and(|k| k != this) && !reported.0 {
            reported.0 = true;
            let detail = format!("message {i} changes block_metadata_type within the stream");
            walk.push_check(Check::MetadataOrder { rpc }, format!("[{i}].block_metadata_type"), Some(this.to_string()), detail);
        }
        kind = Some(this);
        for (j, range) in ranges.iter().enumerate() {
            let Some(range) = range.as_message() else { continue };
            let (offset, size) = (int(range, &["byte_offset"]), int(range, &["size_bytes"]));
            let at = format!("[{i}].block_metadata[{j}]");
            let bad = if size <= 0 {
                Some(format!("{at} has size_bytes {size}"))
            } else if end.is_some_and(|e| offset < e) {
                Some(format!("{at} starts at {offset}, before the previous range ends ({})", end.unwrap_or(0)))
            } else {
                None
            };
            if let Some(detail) = bad
                && !reported.0
            {
                reported.0 = true;
                walk.push_check(Check::MetadataOrder { rpc }, at.clone(), Some(format!("{offset}+{size}")), detail);
            }
            if offset.saturating_add(size) <= start && !reported.1 {
                reported.1 = true;
                let detail = format!("{at} ends at {} , at or before starting_offset {start}", offset.saturating_add(size));
                walk.push_check(Check::MetadataStart { rpc }, at.clone(), Some(format!("{offset}+{size}")), detail);
            }
            end = Some(offset.saturating_add(size.max(0)));
        }
    }
}

/// The rules that look at an error answer of `rpc`.
/// `code` is the code's canonical name (`NOT_FOUND`).
pub fn error(rpc: &str, code: &str, message: &str, details: &[u8], out: &mut Vec<Violation>) {
    let mut push = |check: Check, path: &str, value: Option<String>, detail: String| {
        if let Some(rule) = of(check) {
            out.push(Violation { rule, rpc: rpc.to_owned(), path: path.to_owned(), value, detail });
        }
    };
    // UNIMPLEMENTED tells a CO all it needs (do not retry); gRPC frameworks answer it without
    // a message for a service the plugin does not register, so it is not held to the rule.
    if message.trim().is_empty() && code != "UNIMPLEMENTED" {
        push(Check::ErrorMessage, "status.message", None, format!("the {code} answer has no message"));
    }
    if !details.is_empty() {
        push(Check::ErrorDetails, "status.details", Some(format!("{} bytes", details.len())), "the status details are not empty".into());
    }
}
