//! csi-proto: the ground floor: CSI's wire types (generated from `proto/csi.proto`), the spec
//! versions, byte units and the positioned YAML reader every file format is read with.

pub mod proto;
pub mod units;
pub mod version;
pub mod yaml;

/// Generated prost/tonic code of `proto/agent.proto`: the node agent's own service (`csi-conform
/// agent`), compiled beside `proto/csi.proto` (its descriptors stay out of the CSI pool).
#[allow(clippy::all, missing_docs)]
pub mod agent_wire {
    tonic::include_proto!("csi_conform.agent.v1");
}
