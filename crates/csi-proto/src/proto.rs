//! The CSI v1 wire types (generated from `proto/csi.proto`) and the run-time descriptor pool,
//! including which fields the specification marks `csi_secret`.
//!
//! Everything that needs to reason about fields generically (building requests from YAML,
//! redacting output, printing responses) goes through [`pool`], so it always agrees with the
//! compiled definition and never with a hand-kept list of names.

use std::sync::OnceLock;

use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor,
    ReflectMessage, Value,
};

/// Generated prost/tonic code for package `csi.v1`.
#[allow(clippy::all, missing_docs)]
pub mod csi {
    /// `csi.v1`: messages, enums, `*_client` and `*_server` modules.
    pub mod v1 {
        tonic::include_proto!("csi.v1");
    }
}

pub use csi::v1;

/// The encoded `FileDescriptorSet` of `proto/csi.proto`, custom options included.
pub const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/csi_descriptor.bin"));

/// The protobuf package of every CSI message and service.
pub const PACKAGE: &str = "csi.v1";

/// The CSI services, in the order the specification lists them.
pub const SERVICES: [&str; 5] = [
    "Identity",
    "Controller",
    "GroupController",
    "SnapshotMetadata",
    "Node",
];

/// The descriptor pool of `proto/csi.proto` (with its google/protobuf imports).
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTOR_SET).expect("the compiled CSI descriptor set decodes")
    })
}

/// A CSI message descriptor by short name (`"CreateVolumeRequest"`) or full name
/// (`"csi.v1.CreateVolumeRequest"`).
pub fn message(name: &str) -> Option<MessageDescriptor> {
    let pool = pool();
    pool.get_message_by_name(name)
        .or_else(|| pool.get_message_by_name(&format!("{PACKAGE}.{name}")))
}

/// Finds an RPC by its method name (`"CreateVolume"`), or `"Service/Method"` /
/// `"csi.v1.Service/Method"`. Method names are unique across the CSI services.
pub fn method(name: &str) -> Option<MethodDescriptor> {
    let (service, method) = match name.rsplit_once('/') {
        Some((s, m)) => (Some(s.trim_start_matches(&format!("{PACKAGE}."))), m),
        None => (None, name),
    };
    static BY_NAME: OnceLock<std::collections::HashMap<String, MethodDescriptor>> = OnceLock::new();
    let by_name = BY_NAME.get_or_init(|| all_methods().map(|m| (m.name().to_owned(), m)).collect());
    by_name
        .get(method)
        .filter(|m| service.is_none_or(|s| m.parent_service().name() == s))
        .cloned()
}

/// Every RPC of every CSI service.
pub fn all_methods() -> impl Iterator<Item = MethodDescriptor> {
    pool()
        .services()
        .filter(|s| s.package_name() == PACKAGE)
        .flat_map(|s| s.methods().collect::<Vec<_>>())
}

fn option_flag(options: &DynamicMessage, extension: &str) -> bool {
    let Some(ext) = pool().get_extension_by_name(&format!("{PACKAGE}.{extension}")) else {
        return false;
    };
    options.has_extension(&ext) && options.get_extension(&ext).as_bool() == Some(true)
}

/// Whether the specification marks this field `[(csi_secret) = true]`.
pub fn is_secret_field(field: &FieldDescriptor) -> bool {
    option_flag(&field.options(), "csi_secret")
}

/// Whether the specification marks this field `[(alpha_field) = true]` (experimental).
pub fn is_alpha_field(field: &FieldDescriptor) -> bool {
    option_flag(&field.options(), "alpha_field")
}

/// Whether the specification marks this RPC `[(alpha_method) = true]` or its service
/// `[(alpha_service) = true]`.
pub fn is_alpha_method(method: &MethodDescriptor) -> bool {
    option_flag(&method.options(), "alpha_method")
        || option_flag(&method.parent_service().options(), "alpha_service")
}

/// The full names (`csi.v1.CreateVolumeRequest.secrets`) of every secret-marked field.
pub fn secret_fields() -> Vec<String> {
    pool()
        .all_messages()
        .filter(|m| m.package_name() == PACKAGE)
        .flat_map(|m| m.fields().collect::<Vec<_>>())
        .filter(is_secret_field)
        .map(|f| f.full_name().to_owned())
        .collect()
}

/// The text that replaces every redacted value.
pub const REDACTED: &str = "<redacted>";

/// Whether a field's values must never be shown: secret-marked fields, and
/// `VolumeCapability.MountVolume.mount_flags`, which the specification says may carry
/// sensitive data.
pub fn is_sensitive_field(field: &FieldDescriptor) -> bool {
    is_secret_field(field) || field.full_name() == "csi.v1.VolumeCapability.MountVolume.mount_flags"
}

/// A copy of `message` with every sensitive field's values replaced by [`REDACTED`], at any
/// depth. Map keys stay visible (they name a secret, they are not the secret); values go.
pub fn redacted(message: &DynamicMessage) -> DynamicMessage {
    let mut copy = message.clone();
    walk_sensitive(&mut copy, &mut |m, field| redact_value(m.get_field_mut(field)));
    copy
}

/// A copy of `message` with every sensitive field cleared (not even its keys are left): what
/// may be written to disk to repeat a call later, with the secrets filled in again then.
pub fn without_sensitive(message: &DynamicMessage) -> DynamicMessage {
    let mut copy = message.clone();
    walk_sensitive(&mut copy, &mut |m, field| m.clear_field(field));
    copy
}

/// A copy of `message` with every secret field cleared (not even its keys), mount flags
/// kept: what the cleanup journal (mode 0600) writes so that a repeated call is the very
/// request the plugin saw, with the secrets filled in again from the secrets file then.
pub fn without_secrets(message: &DynamicMessage) -> DynamicMessage {
    let mut copy = message.clone();
    walk_sensitive(&mut copy, &mut |m, field| {
        if is_secret_field(field) {
            m.clear_field(field);
        }
    });
    copy
}

/// The values of `message`'s sensitive fields that must not show up in free text: every
/// value of a secret field, and each mount flag that carries data (`key=value`: the flag and
/// its value; a bare option name such as `ro` is not data).
pub fn sensitive_values(message: &DynamicMessage) -> Vec<String> {
    let mut copy = message.clone();
    let mut found = Vec::new();
    walk_sensitive(&mut copy, &mut |m, field| {
        let mount_flags = !is_secret_field(field);
        collect_strings(m.get_field(field).as_ref(), &mut |s| {
            if !mount_flags {
                found.push(s.to_owned());
            } else if let Some((_, value)) = s.split_once('=') {
                found.push(s.to_owned());
                found.push(value.to_owned());
            }
        });
    });
    found
}

fn collect_strings(value: &Value, out: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => out(s),
        Value::Bytes(b) => {
            if let Ok(s) = std::str::from_utf8(b) {
                out(s)
            }
        }
        Value::List(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Map(entries) => entries.values().for_each(|v| collect_strings(v, out)),
        Value::Message(inner) => inner.fields().for_each(|(_, v)| collect_strings(v, out)),
        _ => {}
    }
}

/// Calls `on` for every set sensitive field of `message` and of the messages inside it.
fn walk_sensitive(message: &mut DynamicMessage, on: &mut dyn FnMut(&mut DynamicMessage, &FieldDescriptor)) {
    let descriptor = message.descriptor();
    for field in descriptor.fields() {
        if !message.has_field(&field) {
            continue;
        }
        if is_sensitive_field(&field) {
            on(message, &field);
            continue;
        }
        if matches!(field.kind(), Kind::Message(_)) {
            match message.get_field_mut(&field) {
                Value::Message(inner) => walk_sensitive(inner, on),
                Value::List(items) => items.iter_mut().for_each(|v| {
                    if let Value::Message(inner) = v {
                        walk_sensitive(inner, on)
                    }
                }),
                Value::Map(entries) => entries.values_mut().for_each(|v| {
                    if let Value::Message(inner) = v {
                        walk_sensitive(inner, on)
                    }
                }),
                _ => {}
            }
        }
    }
}

fn redact_value(value: &mut Value) {
    match value {
        Value::String(s) => *s = REDACTED.to_owned(),
        Value::Bytes(b) => *b = REDACTED.as_bytes().to_vec().into(),
        Value::List(items) => items.iter_mut().for_each(redact_value),
        Value::Map(entries) => entries.values_mut().for_each(redact_value),
        Value::Message(inner) => {
            // A whole secret message: clear every field it has.
            let fields: Vec<_> = inner.descriptor().fields().collect();
            for f in fields {
                if inner.has_field(&f) {
                    redact_value(inner.get_field_mut(&f));
                }
            }
        }
        _ => {}
    }
}

/// Integer fields CSI uses for sizes, counts and offsets: a negative value is meaningless.
pub const NON_NEGATIVE_FIELDS: [&str; 12] = [
    "csi.v1.Volume.capacity_bytes",
    "csi.v1.Snapshot.size_bytes",
    "csi.v1.GetCapacityResponse.available_capacity",
    "csi.v1.ControllerExpandVolumeResponse.capacity_bytes",
    "csi.v1.NodeExpandVolumeResponse.capacity_bytes",
    "csi.v1.NodeGetInfoResponse.max_volumes_per_node",
    "csi.v1.VolumeUsage.available",
    "csi.v1.VolumeUsage.total",
    "csi.v1.VolumeUsage.used",
    "csi.v1.BlockMetadata.byte_offset",
    "csi.v1.BlockMetadata.size_bytes",
    "csi.v1.GetMetadataAllocatedResponse.volume_capacity_bytes",
];

/// A value in a message that CSI v1.12 does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpossibleValue {
    /// Where: a dotted path with `[n]` list indices (`capabilities[2].rpc.type`).
    pub path: String,
    /// What is wrong.
    pub kind: Impossible,
}

/// The kinds of [`ImpossibleValue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Impossible {
    /// A size, count or offset below zero.
    Negative(i64),
    /// An enum number the enum does not define (garbage, or a newer spec version).
    UndefinedEnum {
        /// The number.
        number: i32,
        /// The enum's full name.
        enum_name: String,
    },
}

impl std::fmt::Display for ImpossibleValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Impossible::Negative(n) => write!(f, "{} = {n}, which cannot be negative", self.path),
            Impossible::UndefinedEnum { number, enum_name } => write!(
                f,
                "{} = {number}, which {enum_name} does not define in CSI v1.12 or v1.13 (garbage, or a newer spec version)",
                self.path
            ),
        }
    }
}

/// Every value of `message` (at any depth) that CSI v1.12 does not allow: undefined enum
/// numbers (from the descriptor) and negative [`NON_NEGATIVE_FIELDS`].
pub fn impossible_values(message: &DynamicMessage) -> Vec<ImpossibleValue> {
    let mut found = Vec::new();
    find_impossible(message, "", &mut found);
    found
}

fn find_impossible(message: &DynamicMessage, prefix: &str, found: &mut Vec<ImpossibleValue>) {
    for (field, value) in message.fields() {
        let path = if prefix.is_empty() { field.name().to_owned() } else { format!("{prefix}.{}", field.name()) };
        let items: Vec<(String, &Value)> = match value {
            Value::List(items) => items.iter().enumerate().map(|(i, v)| (format!("{path}[{i}]"), v)).collect(),
            Value::Map(entries) => entries
                .iter()
                .map(|(k, v)| match k {
                    prost_reflect::MapKey::String(k) => (format!("{path}.{k}"), v),
                    k => (format!("{path}[{k:?}]"), v),
                })
                .collect(),
            v => vec![(path, v)],
        };
        for (path, v) in items {
            match (field.kind(), v) {
                (Kind::Enum(e), Value::EnumNumber(n)) if e.get_value(*n).is_none() => found.push(ImpossibleValue {
                    path,
                    kind: Impossible::UndefinedEnum { number: *n, enum_name: e.full_name().to_owned() },
                }),
                (_, Value::I64(n)) if *n < 0 && NON_NEGATIVE_FIELDS.contains(&field.full_name()) => {
                    found.push(ImpossibleValue { path, kind: Impossible::Negative(*n) })
                }
                (_, Value::Message(inner)) => find_impossible(inner, &path, found),
                _ => {}
            }
        }
    }
}

/// The string at `path` (field names, outermost first) of `message`, if every message on the
/// way and the string are there: `str_at(entry, &["volume", "volume_id"])`.
pub fn str_at(message: &DynamicMessage, path: &[&str]) -> Option<String> {
    let (last, fields) = path.split_last()?;
    let mut current = std::borrow::Cow::Borrowed(message);
    for name in fields {
        let next = current.get_field_by_name(name)?.as_message()?.clone();
        current = std::borrow::Cow::Owned(next);
    }
    current.get_field_by_name(last)?.as_str().map(str::to_owned)
}

/// Converts a generated prost message into its dynamic form (for printing and redaction).
pub fn to_dynamic<M: prost::Message + prost::Name>(message: &M) -> DynamicMessage {
    let descriptor = self::message(&M::full_name())
        .unwrap_or_else(|| panic!("{} is in the CSI descriptor pool", M::full_name()));
    let mut dynamic = DynamicMessage::new(descriptor);
    dynamic
        .transcode_from(message)
        .expect("a generated message transcodes into its own descriptor");
    dynamic
}

fn json_options() -> prost_reflect::SerializeOptions {
    prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true)
        .stringify_64_bit_integers(false)
}

/// The message with sensitive values redacted, serialised to JSON bytes with proto field
/// names and without default-valued fields.
fn redacted_json_bytes(message: &DynamicMessage) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut buf);
    redacted(message).serialize_with_options(&mut ser, &json_options()).ok()?;
    Some(buf)
}

/// The message as a JSON value with proto field names, *unredacted*: strip it first
/// ([`without_sensitive`]) before it goes anywhere. Read back with [`from_json_value`].
pub fn to_json_value(message: &DynamicMessage) -> serde_json::Value {
    message
        .serialize_with_options(serde_json::value::Serializer, &json_options())
        .unwrap_or(serde_json::Value::Null)
}

/// Reads a message of type `descriptor` from [`to_json_value`]'s form.
pub fn from_json_value(descriptor: MessageDescriptor, value: &serde_json::Value) -> Result<DynamicMessage, String> {
    DynamicMessage::deserialize(descriptor, value).map_err(|e| e.to_string())
}

/// Renders a message the way an operator reads it: YAML with the proto field names, secrets
/// redacted. Used for console output, `call`, and failure details.
pub fn to_redacted_yaml(message: &DynamicMessage) -> String {
    let Some(json) = redacted_json_bytes(message).and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return format!("<{} that could not be rendered>\n", message.descriptor().name());
    };
    match &json {
        serde_json::Value::Object(map) if map.is_empty() => "{}\n".to_owned(),
        _ => serde_yaml::to_string(&json).unwrap_or_default(),
    }
}

/// A one-line JSON rendering with sensitive values redacted, for finding texts and logs.
pub fn to_redacted_json(message: &DynamicMessage) -> String {
    redacted_json_bytes(message)
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| format!("<{}>", message.descriptor().name()))
}

/// The most a [`summary`] says, in characters.
pub const SUMMARY_MAX: usize = 240;

/// A short, redacted account of what a message holds, for a finding about an answer that
/// should have been an error: its set fields as `path=value` in field-number order (map entries by key)
/// (`volume_condition.abnormal=true, volume_condition.message='gone'`), strings quoted and
/// cut at 60 characters, sensitive values redacted as everywhere else, the whole bounded by
/// `max` characters (what does not fit is counted: `(+3 more)`). `an empty message` when
/// nothing is set.
pub fn summary(message: &DynamicMessage, max: usize) -> String {
    let mut items = Vec::new();
    flatten_message("", &redacted(message), &mut items);
    if items.is_empty() {
        return "an empty message".to_owned();
    }
    let mut out = String::new();
    for (n, item) in items.iter().enumerate() {
        let rest = items.len() - n;
        let more = format!(" (+{rest} more)");
        let sep = if out.is_empty() { "" } else { ", " };
        if out.chars().count() + sep.len() + item.chars().count() + if rest > 1 { more.len() } else { 0 } > max {
            out.push_str(&more);
            break;
        }
        out.push_str(sep);
        out.push_str(item);
    }
    out
}

/// `path=value` for every set scalar under `message`, in field-number order.
fn flatten_message(path: &str, message: &DynamicMessage, out: &mut Vec<String>) {
    for (field, value) in message.fields() {
        let at = if path.is_empty() { field.name().to_owned() } else { format!("{path}.{}", field.name()) };
        flatten_value(&at, &field.kind(), value, out);
    }
}

fn flatten_value(path: &str, kind: &prost_reflect::Kind, value: &Value, out: &mut Vec<String>) {
    const STRING_MAX: usize = 60;
    let quoted = |s: &str| {
        if s.chars().count() > STRING_MAX {
            format!("'{}...'", s.chars().take(STRING_MAX).collect::<String>())
        } else {
            format!("'{s}'")
        }
    };
    match value {
        Value::Message(m) => flatten_message(path, m, out),
        Value::List(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten_value(&format!("{path}[{i}]"), kind, v, out);
            }
        }
        Value::Map(entries) => {
            let value_kind = kind.as_message().map(|entry| entry.map_entry_value_field().kind());
            let mut entries: Vec<_> = entries.iter().collect();
            let key_text = |k: &prost_reflect::MapKey| match k {
                prost_reflect::MapKey::String(s) => s.clone(),
                prost_reflect::MapKey::Bool(b) => b.to_string(),
                prost_reflect::MapKey::I32(n) => n.to_string(),
                prost_reflect::MapKey::I64(n) => n.to_string(),
                prost_reflect::MapKey::U32(n) => n.to_string(),
                prost_reflect::MapKey::U64(n) => n.to_string(),
            };
            entries.sort_by_key(|(k, _)| key_text(k));
            for (k, v) in entries {
                let at = format!("{path}.{}", key_text(k));
                flatten_value(&at, value_kind.as_ref().unwrap_or(kind), v, out);
            }
        }
        Value::String(s) => out.push(format!("{path}={}", quoted(s))),
        Value::Bytes(b) => out.push(format!("{path}={}", quoted(&String::from_utf8_lossy(b)))),
        Value::EnumNumber(n) => {
            let name = kind.as_enum().and_then(|e| e.get_value(*n)).map(|v| v.name().to_owned());
            out.push(format!("{path}={}", name.map_or_else(|| n.to_string(), |n| quoted(&n))));
        }
        other => out.push(format!("{path}={other}")),
    }
}

/// Lets the generated types name themselves for [`to_dynamic`].
pub trait NamedMessage: prost::Message + prost::Name {}
impl<T: prost::Message + prost::Name> NamedMessage for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secrets_map_is_marked_secret_in_the_descriptor() {
        let secret = secret_fields();
        assert!(secret.contains(&"csi.v1.CreateVolumeRequest.secrets".to_owned()));
        assert!(secret.contains(&"csi.v1.NodePublishVolumeRequest.secrets".to_owned()));
        // Every field named `secrets` carries the option, and nothing else does.
        for m in pool().all_messages().filter(|m| m.package_name() == PACKAGE) {
            for f in m.fields() {
                assert_eq!(f.name() == "secrets", is_secret_field(&f), "{}", f.full_name());
            }
        }
    }

    #[test]
    fn a_summary_names_set_fields_redacts_and_stays_short() {
        let stats = v1::NodeGetVolumeStatsResponse {
            usage: vec![v1::VolumeUsage { total: 1024, unit: 1, ..Default::default() }],
            volume_condition: Some(v1::VolumeCondition { abnormal: true, message: "the disk is gone".into() }),
        };
        assert_eq!(
            summary(&to_dynamic(&stats), SUMMARY_MAX),
            "usage[0].total=1024, usage[0].unit='BYTES', volume_condition.abnormal=true, volume_condition.message='the disk is gone'"
        );
        assert_eq!(summary(&to_dynamic(&v1::ProbeResponse::default()), SUMMARY_MAX), "an empty message");
        let long = v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                volume_id: "v".repeat(100),
                volume_context: (0..40).map(|i| (format!("k{i:02}"), "x".into())).collect(),
                ..Default::default()
            }),
        };
        let s = summary(&to_dynamic(&long), SUMMARY_MAX);
        assert!(s.chars().count() <= SUMMARY_MAX, "{s}");
        assert!(s.starts_with(&format!("volume.volume_id='{}...'", "v".repeat(60))), "{s}");
        assert!(s.ends_with(" more)"), "{s}");
        let mount = v1::VolumeCapability {
            access_type: Some(v1::volume_capability::AccessType::Mount(v1::volume_capability::MountVolume {
                mount_flags: vec!["password=hunter2".into()],
                ..Default::default()
            })),
            access_mode: None,
        };
        let s = summary(&to_dynamic(&mount), SUMMARY_MAX);
        assert!(!s.contains("hunter2") && s.contains(REDACTED), "{s}");
    }

    #[test]
    fn a_summary_cut_at_its_bound_counts_what_is_left_out() {
        // Two items: `capacity_bytes=5` (16 characters) and `volume_id='abc'` (15); both, with
        // their `, `, make 33. What does not fit is counted, and the count is reserved room
        // for while more than one item is left.
        let volume = v1::Volume { capacity_bytes: 5, volume_id: "abc".into(), ..Default::default() };
        let volume = to_dynamic(&volume);
        assert_eq!(summary(&volume, 34), "capacity_bytes=5, volume_id='abc'");
        assert_eq!(summary(&volume, 33), "capacity_bytes=5, volume_id='abc'", "exactly the bound fits");
        assert_eq!(summary(&volume, 32), "capacity_bytes=5 (+1 more)");
        assert_eq!(summary(&volume, 26), "capacity_bytes=5 (+1 more)", "the first item and the count of two");
        assert_eq!(summary(&volume, 25).trim_start(), "(+2 more)", "nothing fits but the count");
    }

    #[test]
    fn redaction_hides_secret_values_and_mount_flags_at_any_depth() {
        let req = v1::CreateVolumeRequest {
            name: "vol".into(),
            secrets: [("password".to_owned(), "hunter2".to_owned())].into(),
            volume_capabilities: vec![v1::VolumeCapability {
                access_type: Some(v1::volume_capability::AccessType::Mount(
                    v1::volume_capability::MountVolume {
                        fs_type: "ext4".into(),
                        mount_flags: vec!["password=hunter3".into()],
                        volume_mount_group: String::new(),
                    },
                )),
                access_mode: None,
            }],
            ..Default::default()
        };
        let text = to_redacted_yaml(&to_dynamic(&req));
        assert!(!text.contains("hunter"), "{text}");
        assert!(text.contains("password"), "keys stay visible: {text}");
        assert!(text.contains("ext4"), "{text}");
        assert!(text.contains(REDACTED), "{text}");
    }

    #[test]
    fn sensitive_values_are_found_and_stripped_from_the_descriptor() {
        let req = v1::NodePublishVolumeRequest {
            volume_id: "v".into(),
            secrets: [("token".to_owned(), "s3cr3t-value".to_owned())].into(),
            volume_capability: Some(v1::VolumeCapability {
                access_type: Some(v1::volume_capability::AccessType::Mount(v1::volume_capability::MountVolume {
                    fs_type: "ext4".into(),
                    mount_flags: vec!["ro".into(), "password=hunter3".into()],
                    volume_mount_group: String::new(),
                })),
                access_mode: None,
            }),
            ..Default::default()
        };
        let message = to_dynamic(&req);
        let mut values = sensitive_values(&message);
        values.sort();
        assert_eq!(values, ["hunter3", "password=hunter3", "s3cr3t-value"]);
        let stripped = to_redacted_json(&without_sensitive(&message));
        assert_eq!(stripped, r#"{"volume_id":"v","volume_capability":{"mount":{"fs_type":"ext4"}}}"#);
    }

    #[test]
    fn impossible_values_are_found_by_field_and_enum_descriptor() {
        for name in NON_NEGATIVE_FIELDS {
            let (parent, field) = name.rsplit_once('.').unwrap();
            let m = message(parent).unwrap_or_else(|| panic!("{name}: no such message"));
            assert!(m.get_field_by_name(field).is_some(), "{name}: no such field");
        }
        let created = v1::CreateVolumeResponse {
            volume: Some(v1::Volume { volume_id: "v".into(), capacity_bytes: -5, ..Default::default() }),
        };
        let found: Vec<String> = impossible_values(&to_dynamic(&created)).iter().map(ToString::to_string).collect();
        assert_eq!(found, ["volume.capacity_bytes = -5, which cannot be negative"]);
        use v1::controller_service_capability::{Rpc, Type};
        let caps = v1::ControllerGetCapabilitiesResponse {
            capabilities: vec![
                v1::ControllerServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: 1 })) },
                v1::ControllerServiceCapability { r#type: Some(Type::Rpc(Rpc { r#type: 99 })) },
            ],
        };
        let found: Vec<String> = impossible_values(&to_dynamic(&caps)).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            ["capabilities[1].rpc.type = 99, which csi.v1.ControllerServiceCapability.RPC.Type does not define in CSI v1.12 or v1.13 (garbage, or a newer spec version)"]
        );
        assert!(impossible_values(&to_dynamic(&v1::CreateVolumeResponse::default())).is_empty());
    }

    #[test]
    fn method_names_are_unique_across_the_csi_services() {
        let names: std::collections::BTreeSet<String> = all_methods().map(|m| m.name().to_owned()).collect();
        assert_eq!(names.len(), all_methods().count(), "method() looks RPCs up by name alone");
    }

    #[test]
    fn methods_resolve_by_short_and_qualified_name() {
        assert_eq!(method("CreateVolume").unwrap().parent_service().name(), "Controller");
        assert_eq!(method("Node/NodeGetInfo").unwrap().name(), "NodeGetInfo");
        assert_eq!(method("csi.v1.Identity/Probe").unwrap().name(), "Probe");
        assert!(method("Identity/CreateVolume").is_none());
        assert!(is_alpha_method(&method("GetSnapshot").unwrap()));
        assert!(!is_alpha_method(&method("ControllerModifyVolume").unwrap()), "GA since v1.12");
        assert!(!is_alpha_method(&method("CreateVolume").unwrap()));
    }
}
