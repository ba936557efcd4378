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
    all_methods().find(|m| {
        m.name() == method && service.is_none_or(|s| m.parent_service().name() == s)
    })
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
    redact_in_place(&mut copy);
    copy
}

fn redact_in_place(message: &mut DynamicMessage) {
    let descriptor = message.descriptor();
    for field in descriptor.fields() {
        if !message.has_field(&field) {
            continue;
        }
        if is_sensitive_field(&field) {
            let value = message.get_field_mut(&field);
            redact_value(value);
            continue;
        }
        if matches!(field.kind(), Kind::Message(_)) {
            match message.get_field_mut(&field) {
                Value::Message(inner) => redact_in_place(inner),
                Value::List(items) => items.iter_mut().for_each(|v| {
                    if let Value::Message(inner) = v {
                        redact_in_place(inner)
                    }
                }),
                Value::Map(entries) => entries.values_mut().for_each(|v| {
                    if let Value::Message(inner) = v {
                        redact_in_place(inner)
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

/// The message with sensitive values redacted, serialised to JSON bytes with proto field
/// names and without default-valued fields.
fn redacted_json_bytes(message: &DynamicMessage) -> Option<Vec<u8>> {
    let options = prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true)
        .stringify_64_bit_integers(false);
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut buf);
    redacted(message).serialize_with_options(&mut ser, &options).ok()?;
    Some(buf)
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
