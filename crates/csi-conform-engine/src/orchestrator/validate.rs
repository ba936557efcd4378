//! How an orchestrator that sends ValidateVolumeCapabilities reconciles the answer before it
//! uses a volume (Nomad's `compareCapabilities` in `plugins/csi/client.go`, row
//! `validate.reconcile`): no `confirmed` is accepted; a `confirmed` must hold, for each
//! requested capability, one with the same access mode (or none), the same access type (or
//! none), the same fs_type and every requested mount flag.

use crate::proto::v1::{self, volume_capability::AccessType};

/// Ok when the orchestrator accepts `answer` to a request for `requested`; otherwise why not.
pub fn accepts(requested: &[v1::VolumeCapability], answer: &v1::ValidateVolumeCapabilitiesResponse) -> Result<(), String> {
    let Some(confirmed) = &answer.confirmed else {
        return Ok(());
    };
    match requested.iter().find(|want| !confirmed.volume_capabilities.iter().any(|got| matches(want, got))) {
        None => Ok(()),
        Some(want) => Err(format!("confirmed no capability matching the requested {}", describe(want))),
    }
}

fn mode(c: &v1::VolumeCapability) -> i32 {
    c.access_mode.as_ref().map_or(0, |m| m.mode)
}

fn matches(want: &v1::VolumeCapability, got: &v1::VolumeCapability) -> bool {
    if mode(got) != 0 && mode(got) != mode(want) {
        return false;
    }
    match (&want.access_type, &got.access_type) {
        (_, None) => true,
        (Some(AccessType::Block(_)), Some(AccessType::Block(_))) => true,
        (Some(AccessType::Mount(w)), Some(AccessType::Mount(g))) => {
            w.fs_type == g.fs_type && w.mount_flags.iter().all(|f| g.mount_flags.contains(f))
        }
        _ => false,
    }
}

fn describe(c: &v1::VolumeCapability) -> String {
    let access = match &c.access_type {
        Some(AccessType::Block(_)) => "block".to_owned(),
        Some(AccessType::Mount(m)) if m.fs_type.is_empty() => "mount".to_owned(),
        Some(AccessType::Mount(m)) => format!("mount ({})", m.fs_type),
        None => "capability".to_owned(),
    };
    let mode = v1::volume_capability::access_mode::Mode::try_from(mode(c)).map_or("?", |m| m.as_str_name());
    format!("{access} {mode}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use v1::volume_capability::{AccessMode, BlockVolume, MountVolume, access_mode::Mode};

    fn cap(block: bool, mode: Mode, flags: &[&str]) -> v1::VolumeCapability {
        let access_type = if block {
            AccessType::Block(BlockVolume {})
        } else {
            AccessType::Mount(MountVolume { mount_flags: flags.iter().map(|f| (*f).to_owned()).collect(), ..Default::default() })
        };
        v1::VolumeCapability { access_type: Some(access_type), access_mode: Some(AccessMode { mode: mode as i32 }) }
    }

    fn answer(confirmed: Option<Vec<v1::VolumeCapability>>) -> v1::ValidateVolumeCapabilitiesResponse {
        v1::ValidateVolumeCapabilitiesResponse {
            confirmed: confirmed.map(|volume_capabilities| v1::validate_volume_capabilities_response::Confirmed {
                volume_capabilities,
                ..Default::default()
            }),
            message: String::new(),
        }
    }

    #[test]
    fn each_requested_capability_needs_a_matching_confirmed_one() {
        let rw = cap(false, Mode::SingleNodeWriter, &["noexec"]);
        let ro = cap(false, Mode::MultiNodeReaderOnly, &[]);
        assert!(accepts(std::slice::from_ref(&rw), &answer(None)).is_ok(), "no confirmed is accepted");
        assert!(accepts(std::slice::from_ref(&rw), &answer(Some(vec![rw.clone()]))).is_ok());
        let err = accepts(&[rw.clone(), ro.clone()], &answer(Some(vec![rw.clone()]))).unwrap_err();
        assert!(err.contains("MULTI_NODE_READER_ONLY"), "{err}");
        assert!(accepts(std::slice::from_ref(&rw), &answer(Some(vec![cap(false, Mode::SingleNodeWriter, &[])]))).is_err(), "a flag left out");
        assert!(accepts(std::slice::from_ref(&rw), &answer(Some(vec![cap(true, Mode::SingleNodeWriter, &[])]))).is_err(), "block for mount");
        let no_mode = v1::VolumeCapability { access_mode: None, ..rw.clone() };
        assert!(accepts(&[rw], &answer(Some(vec![no_mode]))).is_ok(), "an unset mode matches any");
    }
}
