//! csi-conform-engine: runs scenario suites against a plugin: suites and their checks, run
//! settings, orchestrator profiles, csi-sanity parity, the journal of what a run created,
//! cleanup from it, and the session that owns a run from connect to exit.

pub mod cleanup;
pub mod config;
pub mod journal;
#[cfg(test)]
mod layout;
pub mod orchestrator;
pub mod parity;
pub mod session;
pub mod suite;

use csi_client::{client, fingerprint, marker, mounts, peer, scrub, secrets};
use csi_conform_report::report;
use csi_proto::{proto, units, version, yaml};
#[cfg(test)]
use csi_reference::reference;
use csi_spec::{capability, rules, spec};
