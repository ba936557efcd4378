//! proptest strategies for volume capabilities and sets of them, bounded by configuration
//! (file-system types, mount flags, access types and modes), for property-based checks.
//!
//! Every choice lists its simplest option first, so a failing case shrinks towards
//! `SINGLE_NODE_WRITER mount()` with no flags: the minimal capability that still fails.

use proptest::{prelude::*, strategy::ValueTree};

use super::{AccessMode, AccessType, Mount, VolumeCapability};

/// What generated capabilities may contain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Bounds {
    /// File-system types to choose from; `""` (the plugin's default) is always included.
    pub fs_types: Vec<String>,
    /// Mount flags to choose subsets of.
    pub mount_flags: Vec<String>,
    /// Generate block capabilities.
    pub block: bool,
    /// Generate mount capabilities.
    pub mount: bool,
    /// Access modes to choose from (spec names); empty means all seven.
    pub access_modes: Vec<String>,
    /// volume_mount_group values to choose from (empty: never set).
    pub volume_mount_groups: Vec<String>,
    /// The most capabilities in one set.
    pub max_capabilities: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            fs_types: vec!["ext4".into(), "xfs".into()],
            mount_flags: vec!["noatime".into(), "nodev".into(), "nosuid".into(), "noexec".into()],
            block: true,
            mount: true,
            access_modes: Vec::new(),
            volume_mount_groups: Vec::new(),
            max_capabilities: 3,
        }
    }
}

/// Why a [`Bounds`] cannot generate anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("capability bounds: {0}")]
pub struct BoundsError(pub String);

impl Bounds {
    /// The access modes, parsed; an unknown name is an error naming it.
    pub fn modes(&self) -> Result<Vec<AccessMode>, BoundsError> {
        if self.access_modes.is_empty() {
            return Ok(AccessMode::ALL.to_vec());
        }
        self.access_modes
            .iter()
            .map(|name| {
                AccessMode::ALL
                    .into_iter()
                    .find(|m| m.to_string() == *name)
                    .ok_or_else(|| {
                        let all: Vec<String> = AccessMode::ALL.iter().map(ToString::to_string).collect();
                        BoundsError(format!("unknown access mode {name:?}; expected one of {}", all.join(", ")))
                    })
            })
            .collect()
    }

    /// Checks that something can be generated at all.
    pub fn validate(&self) -> Result<(), BoundsError> {
        if !self.block && !self.mount {
            return Err(BoundsError("neither block nor mount capabilities are allowed".into()));
        }
        if self.max_capabilities == 0 {
            return Err(BoundsError("max_capabilities must be at least 1".into()));
        }
        self.modes().map(|_| ())
    }
}

/// One capability within `bounds` (which must [`Bounds::validate`]).
///
/// The strategy is concrete, not boxed, so its value trees are `Send`: a property step holds
/// one across the awaits of the RPCs that check each candidate while shrinking.
pub fn capability(
    bounds: &Bounds,
) -> impl Strategy<Value = VolumeCapability, Tree = impl ValueTree<Value = VolumeCapability> + Send> + Clone {
    let modes = bounds.modes().unwrap_or_else(|_| AccessMode::ALL.to_vec());
    let mut fs_types = vec![String::new()];
    fs_types.extend(bounds.fs_types.iter().filter(|f| !f.is_empty()).cloned());
    let mut groups = vec![String::new()];
    groups.extend(bounds.volume_mount_groups.iter().cloned());
    let flags = proptest::sample::subsequence(bounds.mount_flags.clone(), 0..=bounds.mount_flags.len());
    // Mount first, so a failure shrinks towards mount unless it needs block. The mount fields
    // are drawn for block capabilities too, and ignored.
    let mut kinds = Vec::new();
    if bounds.mount || !bounds.block {
        kinds.push(false);
    }
    if bounds.block {
        kinds.push(true);
    }
    (
        proptest::sample::select(modes),
        proptest::sample::select(kinds),
        proptest::sample::select(fs_types),
        flags,
        proptest::sample::select(groups),
    )
        .prop_map(|(mode, block, fs_type, mount_flags, volume_mount_group)| VolumeCapability {
            access_mode: Some(mode),
            access_type: Some(if block {
                AccessType::Block
            } else {
                AccessType::Mount(Mount { fs_type, mount_flags, volume_mount_group })
            }),
        })
}

/// A non-empty set of 1..=`max_capabilities` capabilities within `bounds`.
pub fn capability_set(
    bounds: &Bounds,
) -> impl Strategy<Value = Vec<VolumeCapability>, Tree = impl ValueTree<Value = Vec<VolumeCapability>> + Send> + Clone
{
    proptest::collection::vec(capability(bounds), 1..=bounds.max_capabilities.max(1))
}

#[cfg(test)]
mod tests {
    use proptest::{
        strategy::ValueTree,
        test_runner::{Config, TestRunner},
    };

    use super::*;

    #[test]
    fn generated_capabilities_stay_within_bounds() {
        let bounds = Bounds {
            fs_types: vec!["xfs".into()],
            mount_flags: vec!["noatime".into()],
            block: false,
            access_modes: vec!["MULTI_NODE_READER_ONLY".into()],
            ..Bounds::default()
        };
        let mut runner = TestRunner::deterministic();
        for _ in 0..200 {
            let caps = capability_set(&bounds).new_tree(&mut runner).unwrap().current();
            assert!((1..=3).contains(&caps.len()));
            for cap in caps {
                assert_eq!(cap.access_mode, Some(AccessMode::MultiNodeReaderOnly));
                let m = cap.mount_options().expect("mount only");
                assert!(m.fs_type.is_empty() || m.fs_type == "xfs");
                assert!(m.mount_flags.iter().all(|f| f == "noatime"));
            }
        }
    }

    #[test]
    fn a_failure_shrinks_to_the_minimal_capability() {
        // A "plugin" that rejects any set containing a block capability: the minimal
        // failing input is a single SINGLE_NODE_WRITER block capability.
        let mut runner = TestRunner::new_with_rng(Config::default(), proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha));
        let result = runner.run(&capability_set(&Bounds::default()), |caps| {
            prop_assert!(!caps.iter().any(|c| c.access_type == Some(AccessType::Block)));
            Ok(())
        });
        let Err(proptest::test_runner::TestError::Fail(_, minimal)) = result else {
            panic!("the property must fail: {result:?}")
        };
        assert_eq!(minimal, vec![VolumeCapability::block(AccessMode::SingleNodeWriter)]);
    }

    #[test]
    fn bad_bounds_are_refused_with_the_reason() {
        let e = Bounds { access_modes: vec!["WRITER".into()], ..Bounds::default() }.validate().unwrap_err();
        assert!(e.to_string().contains("unknown access mode \"WRITER\""), "{e}");
        let e = Bounds { block: false, mount: false, ..Bounds::default() }.validate().unwrap_err();
        assert!(e.to_string().contains("neither block nor mount"));
    }
}
