//! csi-proto: the ground floor: CSI's wire types (generated from `proto/csi.proto`), the spec
//! versions, byte units and the positioned YAML reader every file format is read with.

pub mod proto;
pub mod units;
pub mod version;
pub mod yaml;
