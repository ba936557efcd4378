//! The answer quirks: the reference plugin does its work faithfully, then tells one lie in
//! what it answers (a missing REQUIRED field, a value out of range, a string or map past its
//! size limit, a malformed topology key, a next_token that loops, an error without a message
//! or with details), each breaking one response rule of [`crate::rules`].

use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value};
use tonic::{Response, Status};

use super::quirks::Quirk;
use super::{Plugin, Service};
use crate::proto;

/// A volume_context value longer than the general 128-byte string limit.
pub const LONG_CONTEXT_VALUE_BYTES: usize = 200;
/// A publish_context larger than the general 4 KiB map limit.
pub const BIG_CONTEXT_BYTES: usize = 5000;

impl Service {
    /// The answer of `rpc` as the active answer quirks tell it.
    pub(crate) fn told<R>(&self, rpc: &str, answer: Result<Response<R>, Status>) -> Result<Response<R>, Status>
    where
        R: prost::Message + prost::Name + Default,
    {
        let plugin = &self.0;
        let Ok(response) = answer else { return answer };
        if !plugin.tells_lies() {
            return Ok(response);
        }
        let mut message = proto::to_dynamic(response.get_ref());
        plugin.lie(rpc, &mut message);
        Ok(Response::new(message.transcode_to::<R>().expect("a lie keeps the answer's type")))
    }
}

impl Plugin {
    fn tells_lies(&self) -> bool {
        Quirk::ALL.iter().any(|q| q.answer_rule().is_some() && self.quirk(*q))
    }

    /// Rewrites a faithful answer of `rpc` into the lie of each active answer quirk.
    fn lie(&self, rpc: &str, message: &mut DynamicMessage) {
        match rpc {
            "CreateVolume" if self.quirk(Quirk::CreateEmptyId) => set(message, &["volume", "volume_id"], Value::String(String::new())),
            "CreateVolume" | "ControllerGetVolume" if self.quirk(Quirk::LongContextValue) => {
                let long = Value::String("v".repeat(LONG_CONTEXT_VALUE_BYTES));
                insert(message, &["volume", "volume_context"], "csi-conform.dev/long", long);
            }
            "ControllerPublishVolume" if self.quirk(Quirk::BigPublishContext) => {
                let big = Value::String("p".repeat(BIG_CONTEXT_BYTES));
                insert(message, &["publish_context"], "csi-conform.dev/big", big);
            }
            "CreateSnapshot" if self.quirk(Quirk::SnapshotNoCreationTime) => {
                clear(message, &["snapshot", "creation_time"]);
            }
            "GetPluginInfo" if self.quirk(Quirk::EmptyVendorVersion) => clear(message, &["vendor_version"]),
            "NodeGetVolumeStats" if self.quirk(Quirk::StatsUnknownUnit) => {
                if let Some(Value::List(usage)) = message.get_field_by_name("usage").map(|v| v.into_owned()) {
                    let usage = usage
                        .into_iter()
                        .map(|mut u| {
                            if let Value::Message(m) = &mut u {
                                m.set_field_by_name("unit", Value::EnumNumber(0));
                            }
                            u
                        })
                        .collect();
                    message.set_field_by_name("usage", Value::List(usage));
                }
            }
            "NodeGetInfo" if self.quirk(Quirk::BadTopologyKey) => {
                rename_topology_keys(message, &["accessible_topology"]);
            }
            _ => {}
        }
    }

    /// `mock-empty-source`: the answer to a CreateVolume with a set but empty
    /// volume_content_source names no volume, as the csi-test mock driver's does.
    pub(crate) fn lie_about_empty_source(&self, response: &mut crate::proto::v1::CreateVolumeResponse) {
        if self.quirk(Quirk::MockEmptySource)
            && let Some(v) = response.volume.as_mut()
        {
            v.volume_id.clear();
        }
    }

    /// `repeat-next-token`: a page asked for with `starting_token` answers with that same
    /// token as its next_token (when there is a next page), so paging would never end.
    /// `capacity-overstated`: 1 TiB more room (and largest volume) than there is.
    pub(crate) fn lie_about_capacity(&self, response: &mut crate::proto::v1::GetCapacityResponse) {
        if self.quirk(Quirk::CapacityOverstated) {
            response.available_capacity = response.available_capacity.saturating_add(1 << 40);
            response.maximum_volume_size = response.maximum_volume_size.map(|m| m.saturating_add(1 << 40));
        }
    }

    pub(crate) fn lie_about_next_token(&self, starting_token: &str, next_token: &mut String) {
        if self.quirk(Quirk::RepeatNextToken) && !starting_token.is_empty() && !next_token.is_empty() {
            *next_token = starting_token.to_owned();
        }
    }

    /// An error as the active error quirks tell it.
    pub(crate) fn told_error(&self, status: Status) -> Status {
        let status = if self.quirk(Quirk::EmptyErrorMessage) { Status::new(status.code(), "") } else { status };
        if self.quirk(Quirk::ErrorDetails) {
            // A google.rpc.Status-like payload: field 1 (code) set.
            let details = tonic::codegen::Bytes::from_static(&[0x08, 0x05]);
            return Status::with_details(status.code(), status.message().to_owned(), details);
        }
        status
    }
}

fn at_path<'m>(message: &'m mut DynamicMessage, path: &[&str]) -> Option<&'m mut DynamicMessage> {
    let mut current = message;
    for name in path {
        let field = current.descriptor().get_field_by_name(name)?;
        if !current.has_field(&field) {
            return None;
        }
        current = current.get_field_mut(&field).as_message_mut()?;
    }
    Some(current)
}

fn set(message: &mut DynamicMessage, path: &[&str], value: Value) {
    let (last, parent) = path.split_last().expect("a path");
    if let Some(m) = at_path(message, parent) {
        m.set_field_by_name(last, value);
    }
}

fn clear(message: &mut DynamicMessage, path: &[&str]) {
    let (last, parent) = path.split_last().expect("a path");
    if let Some(m) = at_path(message, parent) {
        m.clear_field_by_name(last);
    }
}

fn insert(message: &mut DynamicMessage, path: &[&str], key: &str, value: Value) {
    let (last, parent) = path.split_last().expect("a path");
    if let Some(m) = at_path(message, parent)
        && let Some(field) = m.descriptor().get_field_by_name(last)
        && let Some(map) = m.get_field_mut(&field).as_map_mut()
    {
        map.insert(MapKey::String(key.to_owned()), value);
    }
}

/// Topology keys with a character the spec does not allow (a space).
fn rename_topology_keys(message: &mut DynamicMessage, path: &[&str]) {
    let Some(topology) = at_path(message, path) else { return };
    let Some(field) = topology.descriptor().get_field_by_name("segments") else { return };
    let Some(map) = topology.get_field_mut(&field).as_map_mut() else { return };
    let renamed = map
        .drain()
        .map(|(k, v)| (MapKey::String(format!("{} node", k.as_str().unwrap_or_default())), v))
        .collect();
    *map = renamed;
}
