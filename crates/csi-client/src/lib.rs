//! csi-client: talking to a CSI plugin: endpoints and the client, the plugin's fingerprint,
//! secrets, the scrubbing of secrets from every text, and mounts.

pub mod client;
pub mod fingerprint;
pub mod mounts;
pub mod scrub;
pub mod secrets;

use csi_proto::{proto, version, yaml};
use csi_spec::rules;
