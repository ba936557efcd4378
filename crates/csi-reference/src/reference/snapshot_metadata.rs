//! The reference plugin's SnapshotMetadata service: the allocated extents of a block snapshot
//! (its copy's data extents) and the changed extents between two snapshots of one volume,
//! streamed as VARIABLE_LENGTH BlockMetadata.

use std::pin::Pin;

use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::proto::v1::{self, BlockMetadataType, snapshot_metadata_server::SnapshotMetadata};

use super::backing;
use super::state::SnapshotRecord;
use super::{Plugin, Service, checks};

/// Extents per streamed message when the caller sets no max_results.
const DEFAULT_PAGE: usize = 256;
/// The granule in which deltas are compared and reported.
const DELTA_GRANULE: u64 = 4096;

/// The extents of one answer, before they are split into messages.
struct Extents {
    capacity: i64,
    extents: Vec<(u64, u64)>,
    page: usize,
}

impl Extents {
    /// Message-sized chunks; always at least one (possibly empty) so the caller learns the
    /// metadata type and capacity.
    fn pages(&self) -> Vec<Vec<v1::BlockMetadata>> {
        let all: Vec<v1::BlockMetadata> = self
            .extents
            .iter()
            .map(|(o, l)| v1::BlockMetadata {
                byte_offset: *o as i64,
                size_bytes: *l as i64,
            })
            .collect();
        if all.is_empty() {
            return vec![Vec::new()];
        }
        all.chunks(self.page)
            .map(<[v1::BlockMetadata]>::to_vec)
            .collect()
    }
}

/// Keeps the extents that end after `start`, trimming one that straddles it.
fn from_offset(extents: Vec<(u64, u64)>, start: u64) -> Vec<(u64, u64)> {
    extents
        .into_iter()
        .filter(|(o, l)| o + l > start)
        .map(|(o, l)| {
            if o < start {
                (start, o + l - start)
            } else {
                (o, l)
            }
        })
        .collect()
}

fn page_size(max_results: i32) -> Result<usize, Status> {
    if max_results < 0 {
        return Err(Status::invalid_argument("max_results must not be negative"));
    }
    Ok(if max_results == 0 {
        DEFAULT_PAGE
    } else {
        max_results as usize
    })
}

/// INVALID_ARGUMENT for a negative offset (an invalid argument value), OUT_OF_RANGE for one
/// beyond the volume (the error table's "exceeds the volume size").
fn check_offset(offset: i64, capacity: i64) -> Result<u64, Status> {
    if offset < 0 {
        return Err(Status::invalid_argument(format!("starting_offset {offset} is negative")));
    }
    if offset > capacity {
        return Err(Status::out_of_range(format!(
            "starting_offset {offset} is outside the volume (0..={capacity})"
        )));
    }
    Ok(offset as u64)
}

fn block_snapshot(s: &SnapshotRecord) -> Result<(), Status> {
    if !s.has_block {
        return Err(Status::invalid_argument(format!(
            "snapshot {} is not of a block volume; snapshot metadata exists only for block volumes",
            s.id
        )));
    }
    Ok(())
}

impl Plugin {
    fn get_metadata_allocated(
        &self,
        req: v1::GetMetadataAllocatedRequest,
    ) -> Result<Extents, Status> {
        checks::required(&req.snapshot_id, "snapshot_id")?;
        let page = page_size(req.max_results)?;
        let state = self.store.snapshot()?;
        let s = state.snapshots.get(&req.snapshot_id).ok_or_else(|| {
            Status::not_found(format!("snapshot {} does not exist", req.snapshot_id))
        })?;
        block_snapshot(s)?;
        let start = check_offset(req.starting_offset, s.size)?;
        let extents = backing::allocated(&self.data.snapshot(&s.id).block())
            .map_err(|e| Status::internal(format!("could not read the snapshot: {e}")))?;
        Ok(Extents {
            capacity: s.size,
            extents: from_offset(extents, start),
            page,
        })
    }

    fn get_metadata_delta(&self, req: v1::GetMetadataDeltaRequest) -> Result<Extents, Status> {
        checks::required(&req.base_snapshot_id, "base_snapshot_id")?;
        checks::required(&req.target_snapshot_id, "target_snapshot_id")?;
        let page = page_size(req.max_results)?;
        let state = self.store.snapshot()?;
        let find = |id: &str| {
            state
                .snapshots
                .get(id)
                .ok_or_else(|| Status::not_found(format!("snapshot {id} does not exist")))
        };
        let base = find(&req.base_snapshot_id)?;
        let target = find(&req.target_snapshot_id)?;
        if base.source_volume_id != target.source_volume_id {
            return Err(Status::invalid_argument(format!(
                "snapshots {} and {} are of different volumes",
                base.id, target.id
            )));
        }
        if base.seq > target.seq {
            return Err(Status::invalid_argument(format!(
                "base snapshot {} is newer than target snapshot {}",
                base.id, target.id
            )));
        }
        block_snapshot(target)?;
        block_snapshot(base)?;
        let start = check_offset(req.starting_offset, target.size)?;
        let extents = backing::changed_extents(
            &self.data.snapshot(&base.id).block(),
            &self.data.snapshot(&target.id).block(),
            DELTA_GRANULE,
        )
        .map_err(|e| Status::internal(format!("could not compare the snapshots: {e}")))?;
        Ok(Extents {
            capacity: target.size,
            extents: from_offset(extents, start),
            page,
        })
    }
}

/// A boxed response stream.
pub type MetadataStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl SnapshotMetadata for Service {
    type GetMetadataAllocatedStream = MetadataStream<v1::GetMetadataAllocatedResponse>;
    type GetMetadataDeltaStream = MetadataStream<v1::GetMetadataDeltaResponse>;

    async fn get_metadata_allocated(
        &self,
        request: Request<v1::GetMetadataAllocatedRequest>,
    ) -> Result<Response<Self::GetMetadataAllocatedStream>, Status> {
        let answer = self
            .call(
                "GetMetadataAllocated",
                request,
                Plugin::get_metadata_allocated,
            )
            .await?;
        let e = answer.into_inner();
        let messages: Vec<Result<v1::GetMetadataAllocatedResponse, Status>> = e
            .pages()
            .into_iter()
            .map(|block_metadata| {
                Ok(v1::GetMetadataAllocatedResponse {
                    block_metadata_type: BlockMetadataType::VariableLength as i32,
                    volume_capacity_bytes: e.capacity,
                    block_metadata,
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(messages))))
    }

    async fn get_metadata_delta(
        &self,
        request: Request<v1::GetMetadataDeltaRequest>,
    ) -> Result<Response<Self::GetMetadataDeltaStream>, Status> {
        let answer = self
            .call("GetMetadataDelta", request, Plugin::get_metadata_delta)
            .await?;
        let e = answer.into_inner();
        let messages: Vec<Result<v1::GetMetadataDeltaResponse, Status>> = e
            .pages()
            .into_iter()
            .map(|block_metadata| {
                Ok(v1::GetMetadataDeltaResponse {
                    block_metadata_type: BlockMetadataType::VariableLength as i32,
                    volume_capacity_bytes: e.capacity,
                    block_metadata,
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(messages))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_are_trimmed_to_the_starting_offset() {
        assert_eq!(
            from_offset(vec![(0, 10), (20, 10)], 5),
            vec![(5, 5), (20, 10)]
        );
        assert_eq!(from_offset(vec![(0, 10), (20, 10)], 10), vec![(20, 10)]);
        assert_eq!(from_offset(vec![(0, 10)], 30), vec![]);
    }

    #[test]
    fn pages_respect_max_results_and_are_never_empty() {
        let e = Extents {
            capacity: 100,
            extents: vec![(0, 1), (2, 1), (4, 1)],
            page: 2,
        };
        let pages = e.pages();
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].len(), 2);
        let none = Extents {
            capacity: 100,
            extents: vec![],
            page: 2,
        };
        assert_eq!(none.pages().len(), 1);
        assert!(page_size(-1).is_err());
        assert!(check_offset(101, 100).is_err());
        assert!(check_offset(-1, 100).is_err());
        assert_eq!(check_offset(100, 100).unwrap(), 100);
    }
}
