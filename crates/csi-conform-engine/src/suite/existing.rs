//! Pre-provisioned volumes the run did not create (`--existing-volume`, `existing-volumes:` in
//! the settings file): what the operator said about each (id, volume_context, capability), and
//! the guard that keeps every RPC that deletes, resizes, modifies or snapshots a volume from
//! ever being sent about one of them.

use std::collections::BTreeMap;

use prost_reflect::{DynamicMessage, Value};

use crate::capability::AccessMode;

/// A volume the run did not create and must leave as it found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExistingVolume {
    /// Its id, as a CO would pass it (Nomad's external id, a static PV's volumeHandle).
    pub id: String,
    /// The volume_context a CO would pass with it.
    pub context: BTreeMap<String, String>,
    /// How it is to be used; fields not given are the run's.
    pub capability: ExistingCapability,
    /// Where it was given (`--existing-volume`, `run.yaml:4:5`), for messages.
    pub origin: String,
}

/// The capability an existing volume is used with. `None` fields take the run's defaults
/// (`--access-type`, SINGLE_NODE_WRITER, the plugin's default file system, no flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExistingCapability {
    /// `access: block` (true) or `access: mount` (false).
    pub block: Option<bool>,
    /// `fs_type: ext4`.
    pub fs_type: Option<String>,
    /// `mount_flags: [noatime]`.
    pub mount_flags: Option<Vec<String>>,
    /// `mode: SINGLE_NODE_WRITER`.
    pub mode: Option<AccessMode>,
}

/// The keys of an existing volume's capability, in the settings file and in
/// `--existing-volume-capability key=value,...`.
pub const CAPABILITY_KEYS: [&str; 4] = ["access", "fs_type", "mount_flags", "mode"];

impl ExistingCapability {
    /// Parses `--existing-volume-capability`: comma-separated `key=value` items (see
    /// [`CAPABILITY_KEYS`]; `mount_flags` separates its flags with `+`), where a bare
    /// `mount`, `block` or access mode name stands for `access=` or `mode=` of it. For
    /// example `mount,fs_type=ext4,mode=SINGLE_NODE_WRITER` or `block,MULTI_NODE_MULTI_WRITER`.
    pub fn parse(text: &str) -> Result<ExistingCapability, String> {
        let mut cap = ExistingCapability::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None if matches!(item, "mount" | "block") => ("access", item),
                None if parse_mode(item).is_ok() => ("mode", item),
                None => {
                    return Err(format!(
                        "{item:?} is not key=value, mount, block or an access mode; keys: {}",
                        CAPABILITY_KEYS.join(", ")
                    ));
                }
            };
            let values = if key == "mount_flags" {
                value.split('+').map(str::trim).filter(|f| !f.is_empty()).map(str::to_owned).collect()
            } else {
                vec![value.to_owned()]
            };
            cap.set(key, values)?;
        }
        cap.check()?;
        Ok(cap)
    }

    /// Sets one key (a list for `mount_flags`, one value otherwise).
    pub fn set(&mut self, key: &str, mut values: Vec<String>) -> Result<(), String> {
        let one = |values: &mut Vec<String>| match values.len() {
            1 => Ok(values.remove(0)),
            _ => Err(format!("{key} takes one value")),
        };
        match key {
            "access" => match one(&mut values)?.as_str() {
                "mount" => self.block = Some(false),
                "block" => self.block = Some(true),
                other => return Err(format!("access: {other:?} is neither mount nor block")),
            },
            "fs_type" => self.fs_type = Some(one(&mut values)?),
            "mount_flags" => self.mount_flags = Some(values),
            "mode" => self.mode = Some(parse_mode(&one(&mut values)?)?),
            other => {
                let hint = super::vars::did_you_mean(other, CAPABILITY_KEYS);
                let hint = if hint.is_empty() { format!("; keys: {}", CAPABILITY_KEYS.join(", ")) } else { hint };
                return Err(format!("unknown capability key {other:?}{hint}"));
            }
        }
        Ok(())
    }

    /// Refuses a block capability with file-system options.
    pub fn check(&self) -> Result<(), String> {
        if self.block == Some(true) && (self.fs_type.is_some() || self.mount_flags.is_some()) {
            return Err("fs_type and mount_flags apply to mount access only, not to access: block".into());
        }
        Ok(())
    }
}

/// An access mode by its spec name.
pub fn parse_mode(name: &str) -> Result<AccessMode, String> {
    AccessMode::ALL.into_iter().find(|m| m.to_string() == name).ok_or_else(|| {
        let all: Vec<String> = AccessMode::ALL.iter().map(ToString::to_string).collect();
        format!("unknown access mode {name:?}; expected one of {}", all.join(", "))
    })
}

/// The RPCs that change or remove a volume (or copy it into a snapshot), with the request
/// field that names it. None is ever sent about an existing volume.
pub const PROTECTED_RPCS: [(&str, &str); 6] = [
    ("DeleteVolume", "volume_id"),
    ("ControllerExpandVolume", "volume_id"),
    ("NodeExpandVolume", "volume_id"),
    ("ControllerModifyVolume", "volume_id"),
    ("CreateSnapshot", "source_volume_id"),
    ("CreateVolumeGroupSnapshot", "source_volume_ids"),
];

/// Why `request` (of `rpc`) must not be sent: it would delete, resize, modify or snapshot
/// one of `existing`. `None` when it touches none of them.
pub fn refusal(rpc: &str, request: &DynamicMessage, existing: &[ExistingVolume]) -> Option<String> {
    let (_, field) = PROTECTED_RPCS.iter().find(|(r, _)| *r == rpc)?;
    let named: Vec<String> = match request.get_field_by_name(field)?.as_ref() {
        Value::String(s) => vec![s.clone()],
        Value::List(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    };
    let hit = existing.iter().find(|v| named.contains(&v.id))?;
    Some(format!(
        "{rpc} of existing volume {} ({}) was not sent: the run never deletes, resizes, modifies or snapshots \
         a volume it did not create",
        hit.id, hit.origin
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, v1};

    #[test]
    fn capabilities_parse_from_the_command_line() {
        let cap = ExistingCapability::parse("mount,fs_type=ext4,mode=SINGLE_NODE_MULTI_WRITER,mount_flags=noatime+nodev")
            .unwrap();
        assert_eq!(cap.block, Some(false));
        assert_eq!(cap.fs_type.as_deref(), Some("ext4"));
        assert_eq!(cap.mode, Some(AccessMode::SingleNodeMultiWriter));
        assert_eq!(cap.mount_flags, Some(vec!["noatime".to_owned(), "nodev".to_owned()]));
        let block = ExistingCapability::parse("block, MULTI_NODE_MULTI_WRITER").unwrap();
        assert_eq!((block.block, block.mode), (Some(true), Some(AccessMode::MultiNodeMultiWriter)));
        assert_eq!(ExistingCapability::parse("").unwrap(), ExistingCapability::default());
        let err = |t: &str| ExistingCapability::parse(t).unwrap_err();
        assert_eq!(err("block,fs_type=xfs"), "fs_type and mount_flags apply to mount access only, not to access: block");
        assert!(err("mode=WRITER").starts_with("unknown access mode \"WRITER\""));
        assert_eq!(err("fstype=xfs"), "unknown capability key \"fstype\"; did you mean fs_type?");
        assert!(err("tape").contains("is not key=value"));
    }

    #[test]
    fn only_rpcs_that_would_harm_an_existing_volume_are_refused() {
        let existing = [ExistingVolume { id: "pv-1".into(), origin: "--existing-volume".into(), ..Default::default() }];
        let delete = |id: &str| proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: id.into(), ..Default::default() });
        let why = refusal("DeleteVolume", &delete("pv-1"), &existing).unwrap();
        assert!(why.starts_with("DeleteVolume of existing volume pv-1 (--existing-volume) was not sent"), "{why}");
        assert_eq!(refusal("DeleteVolume", &delete("mine"), &existing), None);
        let snap = proto::to_dynamic(&v1::CreateSnapshotRequest { source_volume_id: "pv-1".into(), ..Default::default() });
        assert!(refusal("CreateSnapshot", &snap, &existing).is_some());
        let group = proto::to_dynamic(&v1::CreateVolumeGroupSnapshotRequest {
            source_volume_ids: vec!["a".into(), "pv-1".into()],
            ..Default::default()
        });
        assert!(refusal("CreateVolumeGroupSnapshot", &group, &existing).is_some());
        let stage = proto::to_dynamic(&v1::NodeStageVolumeRequest { volume_id: "pv-1".into(), ..Default::default() });
        assert_eq!(refusal("NodeStageVolume", &stage, &existing), None, "staging and publishing are what the run is for");
    }
}
