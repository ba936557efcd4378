//! Run profiles: `full` (every selected scenario, our defaults) and `csi-sanity` (only the
//! scenarios mapped to csi-sanity cases, sending what csi-sanity sends), so that a vendor can
//! first get csi-sanity's verdicts from csi-conform and then move to the full run.

use std::collections::BTreeMap;

use super::model::Scenario;

/// `--profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Profile {
    /// Every scenario of the selected suites.
    #[default]
    Full,
    /// Only the scenarios that cover a csi-sanity case (`list --parity`), with csi-sanity's
    /// requests where ours differ on purpose: its relative `volume_path` `some/path` and its
    /// empty default mutable parameters.
    CsiSanity,
}

/// The relative path csi-sanity sends as `volume_path` where no volume is (cases 81, 83, 84,
/// 87).
pub const CSI_SANITY_NOWHERE: &str = "some/path";

impl Profile {
    /// `full` or `csi-sanity`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Full => "full",
            Profile::CsiSanity => "csi-sanity",
        }
    }

    /// Whether the profile runs `scenario` at all (focus and skip apply on top).
    pub fn includes(self, scenario: &Scenario) -> bool {
        match self {
            Profile::Full => true,
            Profile::CsiSanity => !scenario.parity().is_empty(),
        }
    }

    /// The mutable parameters a run sends when none were given: ours (`iops: "3000"`, which
    /// a volume attribute class would typically carry) or csi-sanity's (none).
    pub fn default_mutable_parameters(self) -> BTreeMap<String, String> {
        match self {
            Profile::Full => BTreeMap::from([("iops".to_owned(), "3000".to_owned())]),
            Profile::CsiSanity => BTreeMap::new(),
        }
    }

    /// `${paths.nowhere}`: a volume path at which no volume is. Ours is the scenario's
    /// absolute second target path (`target2`), where those scenarios publish nothing, so
    /// NOT_FOUND is the only right answer; csi-sanity's is the relative `some/path`.
    pub fn nowhere(self, target2: &std::path::Path) -> String {
        match self {
            Profile::Full => target2.display().to_string(),
            Profile::CsiSanity => CSI_SANITY_NOWHERE.to_owned(),
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_sanity_includes_exactly_the_parity_mapped_builtin_scenarios() {
        let suites = crate::suite::builtin();
        let all: Vec<&Scenario> = suites.iter().flat_map(|s| s.scenarios()).collect();
        let mapped = all.iter().filter(|s| Profile::CsiSanity.includes(s)).count();
        assert!(mapped > 0 && mapped < all.len(), "{mapped} of {}", all.len());
        assert!(all.iter().all(|s| Profile::Full.includes(s)));
        assert!(all.iter().filter(|s| Profile::CsiSanity.includes(s)).all(|s| !s.parity().is_empty()));
    }

    #[test]
    fn csi_sanity_sends_what_csi_sanity_sends() {
        assert!(Profile::CsiSanity.default_mutable_parameters().is_empty());
        assert_eq!(Profile::Full.default_mutable_parameters()["iops"], "3000");
        let target = std::path::Path::new("/tmp/x/target");
        assert_eq!(Profile::CsiSanity.nowhere(target), "some/path");
        assert_eq!(Profile::Full.nowhere(target), "/tmp/x/target");
    }
}
