//! csi-reference: the bundled reference CSI plugin, with quirks that reproduce real plugin
//! bugs, as a library (served by `csi-conform reference-plugin` and `csi-reference-plugin`).

pub mod reference;

use csi_client::{client, mounts, secrets};
use csi_proto::{proto, units, version};
use csi_spec::rules;
