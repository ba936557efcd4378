//! ValidateVolumeCapabilities reconciliation: classifies a plugin's answer against the request
//! the way an orchestrator depends on it (the spec: `confirmed` is set only when every
//! requested capability is supported, and then it must match the request).

use std::{collections::HashMap, fmt};

use super::{DifferenceKind, VolumeCapability};
use crate::proto::v1::{ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse};

/// How a ValidateVolumeCapabilities answer reconciles with its request, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// A confirmed capability, context or parameter differs from the request, a capability
    /// was confirmed that was never requested, or `confirmed` lists no capability at all.
    MismatchedConfirmation,
    /// A confirmed capability leaves out a field the request set (mount flags,
    /// volume_mount_group, fs_type): "valid" said of something the plugin did not read.
    DroppedField,
    /// Only some of the requested capabilities are confirmed; those present match.
    IncompleteConfirmation,
    /// No `confirmed`, and a message saying why.
    Unconfirmed,
    /// No `confirmed` and no message.
    UnconfirmedSilent,
    /// `confirmed` matches the request.
    Confirmed,
}

impl Verdict {
    /// The finding kind used in reports (`incomplete-confirmation`, ...).
    pub fn kind(self) -> &'static str {
        match self {
            Verdict::MismatchedConfirmation => "mismatched-confirmation",
            Verdict::DroppedField => "dropped-field",
            Verdict::IncompleteConfirmation => "incomplete-confirmation",
            Verdict::Unconfirmed => "unconfirmed",
            Verdict::UnconfirmedSilent => "unconfirmed-silent",
            Verdict::Confirmed => "confirmed",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// The outcome of reconciling one answer: the verdict and one sentence per problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    /// The worst verdict found.
    pub verdict: Verdict,
    /// What exactly is wrong (empty when confirmed); mount flags and secrets never appear.
    pub details: Vec<String>,
}

impl Reconciliation {
    /// One readable sentence: the kind and every detail.
    pub fn summary(&self) -> String {
        if self.details.is_empty() {
            self.verdict.kind().to_owned()
        } else {
            format!("{}: {}", self.verdict.kind(), self.details.join("; "))
        }
    }
}

/// Classifies `response` against `request` (see [`Verdict`]).
pub fn reconcile(
    request: &ValidateVolumeCapabilitiesRequest,
    response: &ValidateVolumeCapabilitiesResponse,
) -> Reconciliation {
    let Some(confirmed) = &response.confirmed else {
        return if response.message.trim().is_empty() {
            Reconciliation {
                verdict: Verdict::UnconfirmedSilent,
                details: vec!["the plugin neither confirmed the capabilities nor said why".to_owned()],
            }
        } else {
            Reconciliation {
                verdict: Verdict::Unconfirmed,
                details: vec![format!("not confirmed: {}", response.message.trim())],
            }
        };
    };

    let mut worst = Verdict::Confirmed;
    let mut details = Vec::new();
    let mut note = |verdict: Verdict, detail: String| {
        worst = worst.min(verdict);
        details.push(detail);
    };

    let requested: Vec<VolumeCapability> = request.volume_capabilities.iter().map(Into::into).collect();
    let confirmed_caps: Vec<VolumeCapability> = confirmed.volume_capabilities.iter().map(Into::into).collect();

    if confirmed_caps.is_empty() {
        note(
            Verdict::MismatchedConfirmation,
            "`confirmed` is set but lists no volume capability (the field is REQUIRED)".to_owned(),
        );
    }

    let mut covered = vec![false; requested.len()];
    for (i, cap) in confirmed_caps.iter().enumerate() {
        if let Some(j) = requested.iter().position(|r| r == cap) {
            covered[j] = true;
            continue;
        }
        // The closest requested capability: fewest differences, the same position first.
        let closest = requested
            .iter()
            .enumerate()
            .map(|(j, r)| (r.differences(cap), j))
            .min_by_key(|(d, j)| (d.len(), usize::from(*j != i)));
        match closest {
            None => note(
                Verdict::MismatchedConfirmation,
                format!("confirmed capability {cap} was never requested"),
            ),
            Some((differences, j)) => {
                let all_dropped = differences.iter().all(|d| d.kind == DifferenceKind::Dropped);
                let verdict = if all_dropped { Verdict::DroppedField } else { Verdict::MismatchedConfirmation };
                covered[j] |= all_dropped;
                let what: Vec<String> = differences.iter().map(ToString::to_string).collect();
                note(verdict, format!("capability {}: {}", j + 1, what.join(", ")));
            }
        }
    }

    let missing: Vec<String> = requested
        .iter()
        .zip(&covered)
        .filter(|(_, c)| !**c)
        .map(|(r, _)| r.to_string())
        .collect();
    if !missing.is_empty() && !confirmed_caps.is_empty() {
        note(
            Verdict::IncompleteConfirmation,
            format!(
                "{} of {} requested capabilities confirmed; missing: {}",
                requested.len() - missing.len(),
                requested.len(),
                missing.join("; ")
            ),
        );
    }

    compare_map("volume_context", &request.volume_context, &confirmed.volume_context, &mut note);
    compare_map("parameters", &request.parameters, &confirmed.parameters, &mut note);
    compare_map(
        "mutable_parameters",
        &request.mutable_parameters,
        &confirmed.mutable_parameters,
        &mut note,
    );

    Reconciliation { verdict: worst, details }
}

/// The spec makes the confirmed maps OPTIONAL: an empty one says nothing. A non-empty one
/// must equal the request's. Values are compared but never shown (contexts and parameters
/// can carry sensitive data); keys are named.
fn compare_map(
    name: &str,
    requested: &HashMap<String, String>,
    confirmed: &HashMap<String, String>,
    note: &mut impl FnMut(Verdict, String),
) {
    if confirmed.is_empty() || requested == confirmed {
        return;
    }
    let mut keys: Vec<&String> = requested.keys().chain(confirmed.keys()).collect();
    keys.sort();
    keys.dedup();
    let differing: Vec<String> = keys
        .into_iter()
        .filter(|k| requested.get(*k) != confirmed.get(*k))
        .map(|k| match (requested.contains_key(k), confirmed.contains_key(k)) {
            (true, false) => format!("{k} (not confirmed)"),
            (false, true) => format!("{k} (never requested)"),
            _ => format!("{k} (different value)"),
        })
        .collect();
    note(
        Verdict::MismatchedConfirmation,
        format!("confirmed {name} differs from the request: {}", differing.join(", ")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        capability::{AccessMode, AccessType, Mount},
        proto::v1::validate_volume_capabilities_response::Confirmed,
    };

    fn mount(mode: AccessMode, flags: &[&str], group: &str) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(mode),
            access_type: Some(AccessType::Mount(Mount {
                fs_type: "ext4".into(),
                mount_flags: flags.iter().map(|s| s.to_string()).collect(),
                volume_mount_group: group.into(),
            })),
        }
    }

    fn request(caps: &[VolumeCapability]) -> ValidateVolumeCapabilitiesRequest {
        ValidateVolumeCapabilitiesRequest {
            volume_id: "v".into(),
            volume_context: [("zone".to_owned(), "a".to_owned())].into(),
            volume_capabilities: caps.iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    fn confirm(caps: &[VolumeCapability]) -> ValidateVolumeCapabilitiesResponse {
        ValidateVolumeCapabilitiesResponse {
            confirmed: Some(Confirmed {
                volume_capabilities: caps.iter().map(Into::into).collect(),
                ..Default::default()
            }),
            message: String::new(),
        }
    }

    const SNW: AccessMode = AccessMode::SingleNodeWriter;
    const MNRO: AccessMode = AccessMode::MultiNodeReaderOnly;

    #[test]
    fn an_exact_confirmation_passes_in_any_order() {
        let caps = [mount(SNW, &[], ""), VolumeCapability::block(MNRO)];
        let r = reconcile(&request(&caps), &confirm(&[caps[1].clone(), caps[0].clone()]));
        assert_eq!(r.verdict, Verdict::Confirmed, "{r:?}");
    }

    #[test]
    fn no_confirmation_is_unconfirmed_with_or_without_a_message() {
        let req = request(&[mount(SNW, &[], "")]);
        let r = reconcile(&req, &ValidateVolumeCapabilitiesResponse { confirmed: None, message: "no".into() });
        assert_eq!(r.verdict, Verdict::Unconfirmed);
        assert_eq!(r.summary(), "unconfirmed: not confirmed: no");
        let r = reconcile(&req, &ValidateVolumeCapabilitiesResponse::default());
        assert_eq!(r.verdict, Verdict::UnconfirmedSilent);
    }

    #[test]
    fn a_partial_confirmation_is_incomplete_and_names_what_is_missing() {
        let caps = [mount(SNW, &[], ""), VolumeCapability::block(MNRO)];
        let r = reconcile(&request(&caps), &confirm(&caps[..1]));
        assert_eq!(r.verdict, Verdict::IncompleteConfirmation);
        assert!(r.summary().contains("1 of 2 requested capabilities confirmed; missing: MULTI_NODE_READER_ONLY block"), "{}", r.summary());
    }

    #[test]
    fn a_changed_access_mode_is_a_mismatch_naming_both_values() {
        let r = reconcile(&request(&[mount(SNW, &[], "")]), &confirm(&[mount(MNRO, &[], "")]));
        assert_eq!(r.verdict, Verdict::MismatchedConfirmation);
        assert!(r.summary().contains("requested access mode SINGLE_NODE_WRITER, confirmed MULTI_NODE_READER_ONLY"), "{}", r.summary());
    }

    #[test]
    fn dropped_mount_flags_or_group_are_dropped_fields_without_showing_flags() {
        let req = request(&[mount(SNW, &["password=s3cret"], "1000")]);
        let r = reconcile(&req, &confirm(&[mount(SNW, &[], "")]));
        assert_eq!(r.verdict, Verdict::DroppedField);
        assert!(r.summary().contains("volume_mount_group 1000, the confirmation drops it"), "{}", r.summary());
        assert!(!r.summary().contains("s3cret"));
    }

    #[test]
    fn a_capability_never_requested_is_a_mismatch() {
        let req = request(&[]);
        let r = reconcile(&req, &confirm(&[mount(SNW, &[], "")]));
        assert_eq!(r.verdict, Verdict::MismatchedConfirmation);
        assert!(r.summary().contains("was never requested"));
        let r = reconcile(&request(&[mount(SNW, &[], "")]), &confirm(&[]));
        assert_eq!(r.verdict, Verdict::MismatchedConfirmation);
        assert!(r.summary().contains("lists no volume capability"));
    }

    #[test]
    fn a_confirmed_context_that_differs_is_a_mismatch_without_values() {
        let caps = [mount(SNW, &[], "")];
        let mut resp = confirm(&caps);
        resp.confirmed.as_mut().unwrap().volume_context = [("zone".to_owned(), "secret-b".to_owned())].into();
        let r = reconcile(&request(&caps), &resp);
        assert_eq!(r.verdict, Verdict::MismatchedConfirmation);
        assert!(r.summary().contains("confirmed volume_context differs from the request: zone (different value)"), "{}", r.summary());
        assert!(!r.summary().contains("secret-b"));
        // An empty confirmed context says nothing, and is fine.
        assert_eq!(reconcile(&request(&caps), &confirm(&caps)).verdict, Verdict::Confirmed);
    }
}
