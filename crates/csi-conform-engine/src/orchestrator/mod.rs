//! Orchestrator profiles (`--orchestrator`): what Nomad, Kubernetes and Docker Swarm each do
//! where the CSI spec leaves the CO a choice, as data. One table of [`Behaviour`]s per
//! orchestrator (its own file, the rows of `docs/orchestrators.md` with the version each holds
//! for and where it was read), and a [`CallPattern`]: the typed view of a table that the
//! lifecycle checks consult, each field naming the row it comes from. Pure data and pure
//! functions: no I/O, no RPCs; it imports nothing of the engine, which passes a pattern down
//! as a value and never matches an orchestrator's name.

use std::fmt;

mod kubernetes;
mod nomad;
pub mod paths;
mod profile;
mod release;
mod swarm;
pub mod validate;

pub use paths::Layout;
pub use profile::Profile;
pub use release::{Range, Release};

/// An orchestrator whose call pattern a run can follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Orchestrator {
    /// HashiCorp Nomad.
    Nomad,
    /// Kubernetes (kubelet, external-provisioner and external-attacher).
    Kubernetes,
    /// Docker Swarm (swarmkit cluster volumes).
    Swarm,
}

impl Orchestrator {
    /// Every orchestrator, in the order reports show them.
    pub const ALL: [Orchestrator; 3] = [Orchestrator::Nomad, Orchestrator::Kubernetes, Orchestrator::Swarm];

    /// The name `--orchestrator` takes, and the suffix of an instance's id (`@nomad`).
    pub fn name(self) -> &'static str {
        match self {
            Orchestrator::Nomad => "nomad",
            Orchestrator::Kubernetes => "kubernetes",
            Orchestrator::Swarm => "swarm",
        }
    }

    /// Its name in prose.
    pub fn title(self) -> &'static str {
        match self {
            Orchestrator::Nomad => "Nomad",
            Orchestrator::Kubernetes => "Kubernetes",
            Orchestrator::Swarm => "Docker Swarm",
        }
    }

    /// Parses one `--orchestrator` value: a name, or `all` for every one.
    pub fn parse(word: &str) -> Result<Vec<Orchestrator>, String> {
        if word.eq_ignore_ascii_case("all") {
            return Ok(Orchestrator::ALL.to_vec());
        }
        Orchestrator::ALL.into_iter().find(|o| o.name().eq_ignore_ascii_case(word)).map(|o| vec![o]).ok_or_else(|| {
            format!("unknown orchestrator {word:?}: the orchestrators are nomad, kubernetes, swarm (or all)")
        })
    }

    /// Its behaviours, in the order of its table in `docs/orchestrators.md`.
    pub fn table(self) -> &'static [Behaviour] {
        match self {
            Orchestrator::Nomad => nomad::BEHAVIOURS,
            Orchestrator::Kubernetes => kubernetes::BEHAVIOURS,
            Orchestrator::Swarm => swarm::BEHAVIOURS,
        }
    }

    /// One of its behaviours by id.
    pub fn behaviour(self, id: &str) -> Option<&'static Behaviour> {
        self.table().iter().find(|b| b.id == id)
    }

    /// How its current releases call a plugin ([`Profile::pattern`] for an older one).
    pub fn pattern(self) -> &'static CallPattern {
        match self {
            Orchestrator::Nomad => &NOMAD,
            Orchestrator::Kubernetes => &KUBERNETES,
            Orchestrator::Swarm => &SWARM,
        }
    }

    /// The oldest release its table describes: `--orchestrator <name>@<release>` takes this
    /// one or a later one (docs/orchestrators.md, "Pinned releases").
    pub fn oldest(self) -> Release {
        match self {
            Orchestrator::Nomad => nomad::OLDEST,
            Orchestrator::Kubernetes => kubernetes::OLDEST,
            Orchestrator::Swarm => swarm::OLDEST,
        }
    }
}

impl fmt::Display for Orchestrator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thing an orchestrator does at a point the spec leaves open: a row of its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behaviour {
    /// The row's id, shared by the orchestrators where the question is the same.
    pub id: &'static str,
    /// What it does, in one sentence of our own.
    pub summary: &'static str,
    /// The releases (or the stored commit) it was read for.
    pub holds_for: &'static str,
    /// Where it was read: a path in the orchestrator's public repository, or an issue.
    pub source: &'static str,
    /// The releases it holds for, as data (the start of *holds for* in the doc's table): a
    /// row that changed in some release has a row for each side, with the same id.
    pub range: Range,
}

impl Behaviour {
    /// The row, holding from the first releases `firsts` (one per series) on.
    const fn since(self, firsts: &'static [Release]) -> Behaviour {
        Behaviour { range: Range::Since(firsts), ..self }
    }

    /// The row, holding before the first releases `firsts` (what a change replaced).
    const fn before(self, firsts: &'static [Release]) -> Behaviour {
        Behaviour { range: Range::Before(firsts), ..self }
    }
}

/// A row of a table (the tables are long; this keeps each entry to its four facts), holding
/// for every release its table knows.
const fn row(id: &'static str, summary: &'static str, holds_for: &'static str, source: &'static str) -> Behaviour {
    Behaviour { id, summary, holds_for, source, range: Range::All }
}

/// The ids of the behaviours the checks drive (the rows of the compatibility matrix); the
/// other rows are documented and change no request (retries, error wording, ...).
pub mod ids {
    /// Where the staging path is.
    pub const STAGING: &str = "paths.staging";
    /// Where a block volume is staged, when it differs.
    pub const STAGING_BLOCK: &str = "paths.staging-block";
    /// One volume used two ways on one node is staged once per use, at a path of its own.
    pub const STAGING_PER_USAGE: &str = "paths.staging-per-usage";
    /// Where a mount volume is published.
    pub const PUBLISH_MOUNT: &str = "paths.publish-mount";
    /// Where a block volume is published.
    pub const PUBLISH_BLOCK: &str = "paths.publish-block";
    /// Whether the CO makes the staging directory.
    pub const DIRS_STAGING: &str = "dirs.staging";
    /// What the CO makes of the target path.
    pub const DIRS_TARGET: &str = "dirs.target";
    /// NodeStageVolume only with STAGE_UNSTAGE_VOLUME.
    pub const STAGE_WITHOUT_CAPABILITY: &str = "rpc.stage-without-capability";
    /// When (whether) NodeUnstageVolume is sent.
    pub const UNSTAGE: &str = "rpc.unstage";
    /// The order of the detach RPCs.
    pub const DETACH_ORDER: &str = "rpc.detach-order";
    /// The volume_context on the node RPCs.
    pub const VOLUME_CONTEXT: &str = "fields.volume-context";
    /// The publish_context on the node RPCs.
    pub const PUBLISH_CONTEXT: &str = "fields.publish-context";
    /// Whether and how `readonly` is set.
    pub const READONLY: &str = "fields.readonly";
    /// Where the capability's fs_type and mount_flags come from.
    pub const MOUNT_OPTIONS: &str = "fields.mount-options";
    /// Pod information in NodePublishVolume's volume_context.
    pub const POD_INFO: &str = "fields.pod-info";
    /// The capability ControllerPublishVolume gets.
    pub const CAPABILITY: &str = "fields.capability";
    /// Whether NodeExpandVolume gets the staging path (and whether the CO expands at all).
    pub const EXPAND_STAGING_PATH: &str = "fields.expand-staging-path";
    /// How a volume's topology is matched against a node's.
    pub const TOPOLOGY_MATCH: &str = "topology.match";
    /// Where CreateVolume's accessibility requirements come from.
    pub const TOPOLOGY_REQUISITE: &str = "topology.requisite";
    /// When ValidateVolumeCapabilities is sent.
    pub const VALIDATE_WHEN: &str = "validate.when";
    /// How its answer is reconciled.
    pub const VALIDATE_RECONCILE: &str = "validate.reconcile";
    /// Whether ControllerPublishVolume calls overlap.
    pub const CONCURRENCY_CONTROLLER: &str = "concurrency.controller";
    /// What the CO does when a node plugin restarts while its volumes are staged and
    /// published (fed by `disruption.restart.while-published`).
    pub const RESTART_NODE: &str = "restart.node-plugin";
    /// What the CO does with ControllerUnpublishVolume for a node that is gone (fed by
    /// `disruption.lost-node.controller-unpublish`).
    pub const LOST_NODE: &str = "lost-node.controller-unpublish";
    /// What the CO does with NodeUnpublishVolume and NodeUnstageVolume for paths a node
    /// reboot took away (fed by `disruption.lost-node.node-paths-gone`).
    pub const LOST_NODE_PATHS: &str = "lost-node.node-paths-gone";

    /// The rows fed by a plain scenario (also, or rather than, by orchestrator instances):
    /// the row, the scenario whose findings of these kinds (at warn or fail: the plugin's
    /// fault) turn the cell of every orchestrator the defect reaches
    /// ([`CallPattern::exposed`](super::CallPattern::exposed)), and the kinds. The opt-in
    /// suites' scenarios drive no call pattern (a restart, a lost node or a burst of
    /// publishes is the same calls under every CO); what differs is whether and how each CO
    /// is hurt, which its row says.
    pub const FED_BY: &[(&str, &str, &[&str])] = &[
        (RESTART_NODE, "disruption.restart.while-published", &["restart-lost-state", "restart-lost-publication"]),
        (LOST_NODE, "disruption.lost-node.controller-unpublish", &["lost-node"]),
        // Publishes of different volumes to one node, sent at once: refused under the overlap,
        // or two of them given one device. Only a CO that overlaps such calls meets either.
        (CONCURRENCY_CONTROLLER, "stress.controller-publish.volumes-at-once", &["race-refused", "device-shared"]),
        (LOST_NODE_PATHS, "disruption.lost-node.node-paths-gone", &["paths-gone"]),
    ];

    /// The rows of [`FED_BY`] that orchestrator instances drive as well (the orchestrated
    /// lifecycle's overlapping publishes): without their scenario in the run, a skipped cell
    /// gives the instances' reason.
    pub const ALSO_BY_INSTANCES: &[&str] = &[CONCURRENCY_CONTROLLER];

    /// Every driven id, in the matrix's order.
    pub const DRIVEN: &[&str] = &[
        STAGING,
        STAGING_BLOCK,
        STAGING_PER_USAGE,
        PUBLISH_MOUNT,
        PUBLISH_BLOCK,
        DIRS_STAGING,
        DIRS_TARGET,
        STAGE_WITHOUT_CAPABILITY,
        UNSTAGE,
        DETACH_ORDER,
        VOLUME_CONTEXT,
        PUBLISH_CONTEXT,
        READONLY,
        MOUNT_OPTIONS,
        POD_INFO,
        CAPABILITY,
        EXPAND_STAGING_PATH,
        TOPOLOGY_MATCH,
        TOPOLOGY_REQUISITE,
        VALIDATE_WHEN,
        VALIDATE_RECONCILE,
        CONCURRENCY_CONTROLLER,
        RESTART_NODE,
        LOST_NODE,
        LOST_NODE_PATHS,
    ];
}

/// How a volume's accessible topology is matched against a node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyMatch {
    /// The node's segments must equal one of the volume's topologies (Nomad).
    Exact,
    /// Every segment of one of the volume's topologies must be among the node's (Kubernetes,
    /// Swarm); a node with extra segments matches.
    Subset,
}

impl TopologyMatch {
    /// Whether a node with `node` segments may use a volume accessible from `volume` (no
    /// topology on the volume: any node).
    pub fn matches(self, node: &[(String, String)], volume: &[Vec<(String, String)>]) -> bool {
        if volume.is_empty() {
            return true;
        }
        volume.iter().any(|t| match self {
            TopologyMatch::Exact => t.len() == node.len() && t.iter().all(|s| node.contains(s)),
            TopologyMatch::Subset => !t.is_empty() && t.iter().all(|s| node.contains(s)),
        })
    }
}

/// How one orchestrator calls a plugin: the table folded into the fields the checks read.
/// Each field's doc names its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPattern {
    /// The orchestrator.
    pub orchestrator: Orchestrator,
    /// `paths.*`: where it stages and publishes.
    pub layout: Layout,
    /// `paths.staging-per-usage`: one volume used two ways on one node (read-only and
    /// read-write) is staged once per use, each at a staging path of its own (otherwise once
    /// per node, at one path, and a second use is only a second publication).
    pub stages_per_usage: bool,
    /// `dirs.staging`: it makes the staging directory before NodeStageVolume.
    pub makes_staging_dir: bool,
    /// `dirs.target`: it makes the target's parent (never the target).
    pub makes_target_parent: bool,
    /// `dirs.target`: after NodeUnpublishVolume it removes an empty target the plugin left.
    pub removes_left_target: bool,
    /// `rpc.unstage`: it sends NodeUnstageVolume when the volume leaves the node.
    pub unstages: bool,
    /// `fields.readonly`: it sets NodePublishVolume's `readonly` for a read-only use.
    pub sets_readonly: bool,
    /// `fields.pod-info`: it adds the pod's information to NodePublishVolume's volume_context.
    pub pod_info: bool,
    /// `fields.capability`: ControllerPublishVolume always gets a mount access type.
    pub controller_publish_as_mount: bool,
    /// `fields.mount-options` (or the access mode, where it has no such row): where the
    /// mount_flags it sends on ControllerPublish, NodeStage and NodePublish come from, in prose.
    pub mount_flags_from: &'static str,
    /// `fields.expand-staging-path`: it expands volumes (ControllerExpandVolume, then
    /// NodeExpandVolume where the volume is in use).
    pub expands: bool,
    /// `fields.expand-staging-path`: NodeExpandVolume of a multi-node block volume gets no
    /// staging_target_path, its volume_path being the workload's publish path (the kubelet).
    pub expands_shared_block_unstaged: bool,
    /// `topology.match`.
    pub topology: TopologyMatch,
    /// `topology.requisite`: CreateVolume's requisite is the nodes' topologies (otherwise
    /// the operator's, which a run has none of).
    pub requisite_from_nodes: bool,
    /// `validate.when`: it sends ValidateVolumeCapabilities (with every capability of the
    /// volume) before using a volume, and `validate.reconcile`: it refuses the volume when a
    /// requested capability has no matching confirmed one.
    pub validates: bool,
    /// `concurrency.controller`: ControllerPublishVolume calls for one node overlap.
    pub parallel_controller_publish: bool,
    /// For each behaviour where the orchestrator itself bends the spec: what the spec says.
    /// A plugin that is right by the spec and breaks there gets a warning, not a failure.
    pub deviations: &'static [(&'static str, &'static str)],
    /// Behaviours a run cannot follow, and why (a skip in the matrix, with this reason).
    pub undriven: &'static [(&'static str, &'static str)],
    /// Rows of [`ids::FED_BY`] where the plugin's defect leaves this orchestrator stuck for
    /// good (it retries for ever, the volume stays claimed): its cell fails even where the
    /// spec only has a SHOULD (the finding keeps its own level in the scenario).
    pub stuck_for_good: &'static [&'static str],
    /// Answers a row of [`ids::FED_BY`]'s scenario refuses that this orchestrator takes as
    /// success all the same, so that they do not hurt it: (row, RPC, code). Nomad takes
    /// NOT_FOUND from NodeUnpublishVolume and NodeUnstageVolume as done. The finding keeps its
    /// level in the scenario; only this orchestrator's cell ignores it.
    pub forgiven: &'static [(&'static str, &'static str, &'static str)],
}

impl CallPattern {
    /// What the spec says where this orchestrator bends it at behaviour `id`, if it does.
    pub fn deviation(&self, id: &str) -> Option<&'static str> {
        self.deviations.iter().find(|(b, _)| *b == id).map(|(_, why)| *why)
    }

    /// Why the run does not follow behaviour `id`, if it does not.
    pub fn undriven(&self, id: &str) -> Option<&'static str> {
        self.undriven.iter().find(|(b, _)| *b == id).map(|(_, why)| *why)
    }

    /// Whether a defect that the scenario feeding row `id` ([`ids::FED_BY`]) finds reaches
    /// this orchestrator: a race between ControllerPublishVolume calls for one node only where
    /// it overlaps them (`concurrency.controller`); every other fed row reaches every CO.
    pub fn exposed(&self, id: &str) -> bool {
        id != ids::CONCURRENCY_CONTROLLER || self.parallel_controller_publish
    }

    /// Whether this orchestrator takes `code` from `rpc` as success in row `id` (see
    /// [`CallPattern::forgiven`]).
    pub fn forgives(&self, id: &str, rpc: Option<&str>, code: Option<&str>) -> bool {
        self.forgiven.iter().any(|(row, r, c)| *row == id && Some(*r) == rpc && Some(*c) == code)
    }
}

const NOMAD: CallPattern = CallPattern {
    orchestrator: Orchestrator::Nomad,
    layout: Layout::Nomad,
    stages_per_usage: true,
    makes_staging_dir: true,
    makes_target_parent: true,
    removes_left_target: true,
    unstages: true,
    sets_readonly: true,
    pod_info: false,
    controller_publish_as_mount: false,
    mount_flags_from: "a claim's mount_options",
    // The claim's target and the usage's staging path (hashicorp/nomad#24465, PR #25253).
    expands: true,
    expands_shared_block_unstaged: false,
    topology: TopologyMatch::Exact,
    requisite_from_nodes: false,
    validates: true,
    // Serialised per plugin since PR #17996 (July 2023).
    parallel_controller_publish: false,
    deviations: &[(
        ids::STAGING_PER_USAGE,
        "Nomad stages a volume once per use on a node, a read-only and a read-write allocation each at a staging path of \
         its own, while the spec has the CO keep one staging_target_path per volume and call NodeStageVolume once per \
         volume per node",
    )],
    undriven: &[],
    // The volumewatcher retries a failed controller unpublish; the claim is not freed
    // (PR #13301, nomad#12346). A node detach refused (NodeUnstageVolume above all) keeps the
    // claim unpublishing and ControllerUnpublishVolume unsent, retried at each claim GC.
    stuck_for_good: &[ids::LOST_NODE, ids::LOST_NODE_PATHS],
    // plugins/csi/client.go wraps NOT_FOUND from both node calls as ignorable (PR #8605).
    forgiven: &[
        (ids::LOST_NODE_PATHS, "NodeUnpublishVolume", "NOT_FOUND"),
        (ids::LOST_NODE_PATHS, "NodeUnstageVolume", "NOT_FOUND"),
    ],
};

const KUBERNETES: CallPattern = CallPattern {
    orchestrator: Orchestrator::Kubernetes,
    layout: Layout::Kubelet,
    stages_per_usage: false,
    makes_staging_dir: true,
    makes_target_parent: true,
    removes_left_target: true,
    unstages: true,
    sets_readonly: true,
    // Only for a driver whose CSIDriver object sets podInfoOnMount, which a run cannot know:
    // off, so `fields.pod-info` stays unexercised (a skip in the matrix).
    pod_info: false,
    controller_publish_as_mount: false,
    mount_flags_from: "a PersistentVolume's mountOptions",
    expands: true,
    expands_shared_block_unstaged: true,
    topology: TopologyMatch::Subset,
    requisite_from_nodes: true,
    validates: false,
    parallel_controller_publish: true,
    deviations: &[],
    undriven: &[(
        ids::POD_INFO,
        "the kubelet adds pod information only for a driver whose CSIDriver object sets podInfoOnMount, which a run \
         cannot know; csi-conform sends none",
    )],
    // The external-attacher retries NOT_FOUND like any error (external-attacher#165). The
    // kubelet retries a refused node teardown for ever and keeps the volume in use, so the
    // VolumeAttachment stays (on a node that stays Ready).
    stuck_for_good: &[ids::LOST_NODE, ids::LOST_NODE_PATHS],
    forgiven: &[],
};

const SWARM: CallPattern = CallPattern {
    orchestrator: Orchestrator::Swarm,
    layout: Layout::SwarmFlat,
    stages_per_usage: false,
    makes_staging_dir: false,
    // The target's parent, `/data/published`, is the plugin's propagated mount, which Docker
    // sets up with the plugin: it exists, though Swarm makes nothing in it.
    makes_target_parent: true,
    removes_left_target: false,
    unstages: false,
    sets_readonly: false,
    pod_info: false,
    controller_publish_as_mount: true,
    mount_flags_from: "the mount flags of a volume's access mode",
    expands: false,
    expands_shared_block_unstaged: false,
    topology: TopologyMatch::Subset,
    requisite_from_nodes: false,
    validates: false,
    parallel_controller_publish: false,
    deviations: &[
        (
            ids::UNSTAGE,
            "Swarm never sends NodeUnstageVolume (moby/swarmkit#3178), while the spec calls ControllerUnpublishVolume and \
             DeleteVolume only after NodeUnstageVolume succeeded",
        ),
        (
            ids::DIRS_STAGING,
            "Swarm makes no staging directory (moby/swarmkit#3197), while the spec has the CO ensure staging_target_path is \
             a directory",
        ),
        (
            ids::CAPABILITY,
            "Swarm sends ControllerPublishVolume a mount access type even for a block volume, while the spec lets a plugin \
             refuse a capability it cannot serve the volume with",
        ),
    ],
    undriven: &[(
        ids::EXPAND_STAGING_PATH,
        "Swarm never expands a volume: swarmkit's controller side (manager/csi) has no ControllerExpandVolume and its \
         node side (agent/csi) no NodeExpandVolume",
    )],
    // The agent retries a refused node unpublish or unstage for ever and never reports the
    // volume unpublished, so the manager never sends ControllerUnpublishVolume.
    stuck_for_good: &[ids::LOST_NODE_PATHS],
    forgiven: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A range as [`Range::parse`] reads it: since (true) or before, and the first releases.
    type ParsedRange = (bool, Vec<Release>);

    /// The id of each row of the table under `heading` in `docs/orchestrators.md`, with the
    /// release range its *holds for* cell starts with (`` `since 1.4.12, 1.5.8` ``; none:
    /// every release the table knows).
    fn doc_rows(heading: &str) -> Vec<(String, Option<ParsedRange>)> {
        let doc = include_str!("../../../../docs/orchestrators.md");
        let start = doc.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("no {heading}"));
        let rest = &doc[start + heading.len() + 2..];
        let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .map(|l| {
                let id = l[..l.find('`').unwrap()].to_owned();
                let holds_for = l.split(" | ").nth(2).unwrap_or_else(|| panic!("{id}: no holds-for cell"));
                let range = holds_for.strip_prefix('`').and_then(|r| r.split('`').next()).and_then(|r| {
                    let parsed = Range::parse(r);
                    assert!(parsed.is_some() || !(r.starts_with("since ") || r.starts_with("before ")), "{id}: {r:?}");
                    parsed
                });
                (id, range)
            })
            .collect()
    }

    #[test]
    fn each_table_has_the_rows_of_its_section_of_the_doc_in_order_with_their_ranges() {
        for (o, heading) in [
            (Orchestrator::Nomad, "## Nomad"),
            (Orchestrator::Kubernetes, "## Kubernetes"),
            (Orchestrator::Swarm, "## Docker Swarm"),
        ] {
            let code: Vec<(String, Option<ParsedRange>)> = o
                .table()
                .iter()
                .map(|b| {
                    let range = match b.range {
                        Range::All => None,
                        Range::Since(r) => Some((true, r.to_vec())),
                        Range::Before(r) => Some((false, r.to_vec())),
                    };
                    (b.id.to_owned(), range)
                })
                .collect();
            assert_eq!(code, doc_rows(heading), "{o}: docs/orchestrators.md and crates/csi-conform-engine/src/orchestrator/{o}.rs differ");
            assert!(o.table().iter().all(|b| !b.summary.is_empty() && !b.source.is_empty()), "{o}");
            assert!(o.table().iter().flat_map(|b| b.range.releases()).all(|r| *r > o.oldest()), "{o}: a range below the oldest release");
            for b in o.table().iter().filter(|b| b.range != Range::All) {
                assert!(b.holds_for.starts_with(&b.range.to_string()), "{o} {}: holds_for starts with its range", b.id);
            }
        }
    }

    #[test]
    fn every_deviation_names_a_row_of_its_table_and_a_driven_id() {
        for o in Orchestrator::ALL {
            for (id, why) in o.pattern().deviations {
                assert!(o.behaviour(id).is_some() && ids::DRIVEN.contains(id), "{o}: {id}");
                assert!(why.contains("spec"), "{why}");
            }
            assert_eq!(o.pattern().orchestrator, o);
        }
    }

    #[test]
    fn all_is_every_orchestrator_and_names_parse() {
        assert_eq!(Orchestrator::parse("all").unwrap(), Orchestrator::ALL.to_vec());
        assert_eq!(Orchestrator::parse("Nomad").unwrap(), vec![Orchestrator::Nomad]);
        assert!(Orchestrator::parse("mesos").unwrap_err().contains("nomad, kubernetes, swarm"));
    }

    fn segs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn an_extra_node_segment_matches_a_subset_never_an_exact_rule() {
        let node = segs(&[("zone", "a"), ("rack", "r1")]);
        let volume = vec![segs(&[("zone", "a")])];
        assert!(TopologyMatch::Subset.matches(&node, &volume));
        assert!(!TopologyMatch::Exact.matches(&node, &volume), "hetznercloud/csi-driver#333");
        assert!(TopologyMatch::Exact.matches(&segs(&[("zone", "a")]), &volume));
        assert!(!TopologyMatch::Subset.matches(&segs(&[("zone", "b"), ("rack", "r1")]), &volume));
        assert!(TopologyMatch::Exact.matches(&node, &[]), "a volume without topology fits every node");
        assert!(!TopologyMatch::Exact.matches(&[], &volume), "a node without topology fits no volume that has one");
    }
}
