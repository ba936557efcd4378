//! csi-spec: what the CSI spec requires: the requirement inventory, the response rules every
//! answer is checked against, and volume capabilities.

pub mod capability;
pub mod rules;
pub mod spec;

use csi_proto::{proto, version, yaml};
