//! csi-client: talking to a CSI plugin: endpoints and the client, the plugin's fingerprint,
//! secrets, the scrubbing of secrets from every text, mounts, the node plugin behind a socket
//! and where its files are, and data markers.

pub mod client;
pub mod fingerprint;
pub mod marker;
pub mod mounts;
pub mod peer;
pub mod scrub;
pub mod secrets;

use csi_proto::{proto, version, yaml};
use csi_spec::rules;
