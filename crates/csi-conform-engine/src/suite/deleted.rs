//! Whether an object a DeleteVolume or DeleteSnapshot answered OK for is gone: which calls
//! can tell (the look-up and the listing the plugin advertises: two witnesses, see
//! [`super::witness`]), their requests, and what their answers say. The verifier makes the
//! calls and decides ([`super::verifier::watch`]); this file only knows requests and answers.
//!
//! Why a look, and why only a short one: DeleteVolume "deprovisions" the volume, and a plugin
//! "unable to complete the DeleteVolume call successfully MUST return a non-ok gRPC code"
//! (spec.md, DeleteVolume and DeleteVolume Errors; the same for DeleteSnapshot). CSI has no
//! state for an object being deleted (CreateSnapshot's `ready_to_use` is the only
//! asynchronous completion it knows), and orchestrators forget an object on OK. So an object
//! that still shows after OK was not deleted: ControllerGetVolume / GetSnapshot answer
//! NOT_FOUND for an object that does not exist (their error tables), and ListVolumes /
//! ListSnapshots list what the plugin knows. A backend that finishes a delete in the
//! background may still show the object for a moment, so it is looked up again for a short,
//! bounded grace period (`--delete-grace`) before that is a failure; never longer, and never
//! by deleting again (a second delete answers OK whatever happened: it is idempotent).

use prost_reflect::DynamicMessage;
use tonic::Code;

use crate::{
    fingerprint::{Capability, Fingerprint},
    proto::{self, v1},
};

/// What one look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Look {
    /// The object is not there (NOT_FOUND, or not in the listing).
    Gone,
    /// It still shows: how (`ControllerGetVolume answers OK with it`).
    Still(String),
    /// The listing goes on at this token.
    Next(String),
    /// The answer tells nothing (another error): no verdict either way.
    Unknown(String),
}

/// The id a delete request names, and the noun of the object.
pub(crate) fn deleted_id(rpc: &str, request: &DynamicMessage) -> Option<(&'static str, String)> {
    let (noun, field) = match rpc {
        "DeleteVolume" => ("volume", "volume_id"),
        "DeleteSnapshot" => ("snapshot", "snapshot_id"),
        _ => return None,
    };
    let id = request.get_field_by_name(field)?.as_str()?.to_owned();
    (!id.is_empty()).then_some((noun, id))
}

/// The look-up that names one object of the kind `rpc` deletes (ControllerGetVolume with
/// GET_VOLUME, GetSnapshot with GET_SNAPSHOT), if the plugin advertises it: one of the two
/// witnesses of a delete (the listing, [`listing`], is the other).
pub(crate) fn get_lookup(rpc: &str, fingerprint: &Fingerprint) -> Option<&'static str> {
    let get = match rpc {
        "DeleteVolume" => "ControllerGetVolume",
        "DeleteSnapshot" => "GetSnapshot",
        _ => return None,
    };
    Capability::serving(get).is_some_and(|c| fingerprint.supports(c)).then_some(get)
}

/// The request of `lookup` for `id` (a listing's page at `token`).
pub(crate) fn request(lookup: &str, id: &str, token: &str) -> DynamicMessage {
    match lookup {
        "ControllerGetVolume" => proto::to_dynamic(&v1::ControllerGetVolumeRequest { volume_id: id.to_owned() }),
        "ListVolumes" => proto::to_dynamic(&v1::ListVolumesRequest { starting_token: token.to_owned(), ..Default::default() }),
        "GetSnapshot" => proto::to_dynamic(&v1::GetSnapshotRequest { snapshot_id: id.to_owned(), ..Default::default() }),
        _ => proto::to_dynamic(&v1::ListSnapshotsRequest {
            snapshot_id: id.to_owned(),
            starting_token: token.to_owned(),
            ..Default::default()
        }),
    }
}

/// What `lookup`'s answer says of `id`.
pub(crate) fn look(lookup: &str, id: &str, answer: Result<&DynamicMessage, (Code, &str)>) -> Look {
    let answer = match answer {
        Ok(m) => m,
        Err((Code::NotFound, _)) if matches!(lookup, "ControllerGetVolume" | "GetSnapshot") => return Look::Gone,
        Err((code, message)) => {
            return Look::Unknown(format!("{lookup} answered {}: {message}", crate::client::code_name(code)));
        }
    };
    if matches!(lookup, "ControllerGetVolume" | "GetSnapshot") {
        return Look::Still(format!("{lookup} still answers OK with it"));
    }
    let (ids, next) = listed(lookup, answer);
    if ids.iter().any(|listed| listed == id) {
        return Look::Still(format!("{lookup} still lists it"));
    }
    match next {
        next if next.is_empty() => Look::Gone,
        next => Look::Next(next),
    }
}

/// The ids a page of listing `lookup` (ListVolumes or ListSnapshots) names, and its
/// `next_token` (empty: the last page).
pub(crate) fn listed(lookup: &str, answer: &DynamicMessage) -> (Vec<String>, String) {
    let text = |m: &DynamicMessage, path: &[&str]| proto::str_at(m, path).unwrap_or_default();
    let (object, field) = if lookup == "ListVolumes" { ("volume", "volume_id") } else { ("snapshot", "snapshot_id") };
    let ids = answer
        .get_field_by_name("entries")
        .and_then(|v| v.as_list().map(|l| l.iter().filter_map(|e| e.as_message().map(|e| text(e, &[object, field]))).collect()))
        .unwrap_or_default();
    (ids, text(answer, &["next_token"]))
}

/// The listing that names every object of the kind `rpc` deletes (ListVolumes with
/// LIST_VOLUMES, ListSnapshots with LIST_SNAPSHOTS), if the plugin advertises it: what lets
/// several deletes be checked with one call (see [`super::verifier`]).
pub(crate) fn listing(rpc: &str, fingerprint: &Fingerprint) -> Option<&'static str> {
    let listing = match rpc {
        "DeleteVolume" => "ListVolumes",
        "DeleteSnapshot" => "ListSnapshots",
        _ => return None,
    };
    Capability::serving(listing).is_some_and(|c| fingerprint.supports(c)).then_some(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(ids: &[&str], next: &str) -> DynamicMessage {
        proto::to_dynamic(&v1::ListVolumesResponse {
            entries: ids
                .iter()
                .map(|id| v1::list_volumes_response::Entry {
                    volume: Some(v1::Volume { volume_id: (*id).to_owned(), ..Default::default() }),
                    status: None,
                })
                .collect(),
            next_token: next.to_owned(),
        })
    }

    #[test]
    fn a_listing_shows_the_id_or_pages_on_or_ends() {
        assert_eq!(look("ListVolumes", "v2", Ok(&listing(&["v1", "v2"], ""))), Look::Still("ListVolumes still lists it".into()));
        assert_eq!(look("ListVolumes", "v3", Ok(&listing(&["v1", "v2"], "t"))), Look::Next("t".into()));
        assert_eq!(look("ListVolumes", "v3", Ok(&listing(&["v1"], ""))), Look::Gone);
        let snapshots = proto::to_dynamic(&v1::ListSnapshotsResponse {
            entries: vec![v1::list_snapshots_response::Entry {
                snapshot: Some(v1::Snapshot { snapshot_id: "s1".into(), ..Default::default() }),
            }],
            next_token: String::new(),
        });
        assert_eq!(look("ListSnapshots", "s1", Ok(&snapshots)), Look::Still("ListSnapshots still lists it".into()));
        assert_eq!(look("ListSnapshots", "s2", Ok(&snapshots)), Look::Gone);
    }

    #[test]
    fn a_get_is_gone_on_not_found_only() {
        let ok = proto::to_dynamic(&v1::ControllerGetVolumeResponse::default());
        assert_eq!(look("ControllerGetVolume", "v", Ok(&ok)), Look::Still("ControllerGetVolume still answers OK with it".into()));
        assert_eq!(look("GetSnapshot", "s", Err((Code::NotFound, "gone"))), Look::Gone);
        assert!(matches!(look("ControllerGetVolume", "v", Err((Code::Internal, "boom"))), Look::Unknown(_)));
        // A listing has no NOT_FOUND of its own: an error tells nothing.
        assert!(matches!(look("ListVolumes", "v", Err((Code::NotFound, "?"))), Look::Unknown(_)));
    }

    #[test]
    fn the_id_comes_from_the_delete_request() {
        let delete = proto::to_dynamic(&v1::DeleteVolumeRequest { volume_id: "v1".into(), ..Default::default() });
        assert_eq!(deleted_id("DeleteVolume", &delete), Some(("volume", "v1".to_owned())));
        let empty = proto::to_dynamic(&v1::DeleteSnapshotRequest::default());
        assert_eq!(deleted_id("DeleteSnapshot", &empty), None);
        assert_eq!(deleted_id("DeleteVolumeGroupSnapshot", &delete), None);
        let request = request("ListSnapshots", "s1", "t2");
        assert_eq!(request.get_field_by_name("snapshot_id").unwrap().as_str(), Some("s1"));
        assert_eq!(request.get_field_by_name("starting_token").unwrap().as_str(), Some("t2"));
    }
}
