//! The plugin's pools of objects ([`Pool`]): what a scenario may hold exclusively and which
//! RPCs change each.

use std::fmt;

/// A set of the plugin's objects that a scenario may need unchanged while it runs
/// (`exclusive:`), because it counts them: other scenarios change it by creating and deleting
/// their own. Which scenarios change a pool is derived from the RPCs they may call, whatever
/// answer they expect (a plugin may wrongly create a volume on a call meant to fail), never
/// declared, so a suite author cannot forget it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pool {
    /// The plugin's volumes, as ListVolumes lists them.
    Volumes,
    /// Its snapshots, as ListSnapshots lists them (group snapshots' members included).
    Snapshots,
    /// The run's existing volumes (`--existing-volume`), which the `existing-volume` check
    /// stages and publishes: a plugin may stage a volume at one path per node only.
    ExistingVolumes,
}

impl Pool {
    /// Every pool, in the order of their names in errors and docs.
    pub const ALL: [Pool; 3] = [Pool::Volumes, Pool::Snapshots, Pool::ExistingVolumes];

    /// Its name in `exclusive:`.
    pub fn name(self) -> &'static str {
        match self {
            Pool::Volumes => "volumes",
            Pool::Snapshots => "snapshots",
            Pool::ExistingVolumes => "existing-volumes",
        }
    }

    /// The pool named `name` in `exclusive:`.
    pub fn from_name(name: &str) -> Option<Pool> {
        Pool::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether a call of `rpc` may change the pool (the existing volumes are changed by no
    /// RPC: the engine refuses those that would, and their users are the scenarios running
    /// the `existing-volume` check).
    pub fn changed_by(self, rpc: &str) -> bool {
        match self {
            Pool::Volumes => matches!(rpc, "CreateVolume" | "DeleteVolume"),
            Pool::Snapshots => matches!(
                rpc,
                "CreateSnapshot" | "DeleteSnapshot" | "CreateVolumeGroupSnapshot" | "DeleteVolumeGroupSnapshot"
            ),
            Pool::ExistingVolumes => false,
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
