//! Which node a finding happened on: the node its call went to (the last call of that RPC in
//! the scenario), or, for a finding about no call (a check of a node's paths, mounts or data),
//! the node the step last called or looked at. The context files each finding through
//! [`NodeCalls::of`]; reports show the node on runs of several nodes (or with node agents).

use std::{collections::BTreeMap, sync::Mutex};

use prost_reflect::MethodDescriptor;

use super::settings::{Plugin, RunConfig};
use crate::report::{Finding, FindingNode};

/// The node of a call to `service` for `node` (a step's `node:`), as the context picks its
/// connection: Node calls go to a node (node 0 unless named), Identity calls to the named
/// node, else to the controller (to node 0 when there is no controller); anything else to the
/// controller.
pub(crate) fn node_called(service: &str, node: Option<usize>, has_controller: bool) -> Option<usize> {
    match (service, node) {
        ("Node", n) => Some(n.unwrap_or(0)),
        ("Identity", Some(n)) => Some(n),
        ("Identity", None) if !has_controller => Some(0),
        _ => None,
    }
}

/// What one scenario (or property case) sent to which node, and what it last touched.
#[derive(Debug, Default)]
pub(crate) struct NodeCalls {
    inner: Mutex<Seen>,
}

#[derive(Debug, Default, Clone)]
struct Seen {
    /// The node each RPC last went to (`None`: the controller).
    by_rpc: BTreeMap<String, Option<usize>>,
    /// The step and node of the last call or look at a node's files (`None`: the controller).
    last: Option<(Option<usize>, Option<usize>)>,
}

impl NodeCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `rpc` was sent at `step` to `node` (`None`: the controller).
    pub(crate) fn sent(&self, step: Option<usize>, rpc: &str, node: Option<usize>) {
        let mut seen = self.lock();
        seen.by_rpc.insert(rpc.to_owned(), node);
        seen.last = Some((step, node));
    }

    /// A call of `method` for `node` (a step's `node:`) is sent at `step`, as the context
    /// picks its connection.
    pub(crate) fn sent_to(&self, step: Option<usize>, method: &MethodDescriptor, node: Option<usize>, plugin: &Plugin) {
        let called = node_called(method.parent_service().name(), node, plugin.controller.is_some());
        self.sent(step, method.name(), called);
    }

    /// How reports name the node `finding` happened on (see [`finding_node`]).
    pub(crate) fn named(&self, finding: &Finding, plugin: &Plugin, config: &RunConfig) -> Option<FindingNode> {
        finding_node(plugin, !config.node_agents.is_empty(), self.of(finding)?)
    }

    /// The files of `node` were looked at, at `step`.
    pub(crate) fn looked_at(&self, step: Option<usize>, node: usize) {
        self.lock().last = Some((step, Some(node)));
    }

    /// The node index `finding` happened on: its RPC's last node; without an RPC, the node
    /// last called or looked at in its step; `None` when that was the controller or unknown.
    pub(crate) fn of(&self, finding: &Finding) -> Option<usize> {
        let seen = self.lock();
        match &finding.rpc {
            Some(rpc) => seen.by_rpc.get(rpc).copied().flatten(),
            None => seen.last.filter(|(step, _)| *step == finding.step).and_then(|(_, node)| node),
        }
    }
}

/// How reports name node `index` of `plugin` (where the run reached it, its node id), on a
/// run of several nodes or with node agents (`agents`); `None` on a run of one node (which
/// needs no naming) or for an index the run does not have.
pub(crate) fn finding_node(plugin: &Plugin, agents: bool, index: usize) -> Option<FindingNode> {
    if plugin.nodes.len() < 2 && !agents {
        return None;
    }
    let conn = plugin.nodes.get(index)?;
    let node_id = plugin
        .fingerprint
        .nodes
        .iter()
        .find(|n| n.endpoint == *conn.endpoint())
        .map(|n| n.node_id.clone())
        .filter(|id| !id.is_empty());
    Some(FindingNode { index, endpoint: conn.endpoint().to_string(), node_id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Severity;

    fn finding(rpc: Option<&str>, step: Option<usize>) -> Finding {
        let mut f = Finding::new(Severity::Fail, "k", "m");
        f.rpc = rpc.map(str::to_owned);
        f.step = step;
        f
    }

    #[test]
    fn a_finding_is_on_the_node_its_call_went_to_or_its_step_last_touched() {
        assert_eq!(node_called("Node", None, true), Some(0));
        assert_eq!(node_called("Identity", Some(1), true), Some(1));
        assert_eq!(node_called("Identity", None, true), None);
        assert_eq!(node_called("Identity", None, false), Some(0));
        assert_eq!(node_called("Controller", Some(1), true), None);

        let calls = NodeCalls::default();
        calls.sent(Some(0), "NodeStageVolume", Some(1));
        calls.sent(Some(1), "ControllerPublishVolume", None);
        assert_eq!(calls.of(&finding(Some("NodeStageVolume"), Some(3))), Some(1), "the call's node, at any step");
        assert_eq!(calls.of(&finding(Some("ControllerPublishVolume"), Some(1))), None, "the controller is no node");
        assert_eq!(calls.of(&finding(Some("NodePublishVolume"), Some(1))), None, "never sent: unknown");
        assert_eq!(calls.of(&finding(None, Some(1))), None, "the step last called the controller");
        calls.looked_at(Some(1), 2);
        assert_eq!(calls.of(&finding(None, Some(1))), Some(2), "then looked at node 2's files");
        assert_eq!(calls.of(&finding(None, Some(0))), None, "another step's touch says nothing");
    }
}
