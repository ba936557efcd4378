//! Bounds of generated capabilities as a suite or settings file writes them (`bounds:` of a
//! property step, `--property-bounds FILE`): what each key replaces, and the strict reader.

use crate::{
    capability::{AccessMode, strategy::Bounds},
    yaml::{Node, Plain, Pos},
};

/// The keys of a bounds mapping, in the order the documentation lists them.
pub const BOUNDS_KEYS: [&str; 6] =
    ["access_types", "access_modes", "fs_types", "mount_flags", "volume_mount_groups", "max_capabilities"];

/// Bounds of generated capabilities as written: each key given replaces that part of the
/// bounds it is applied to, the others are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoundsOverride {
    /// `access_types: [mount, block]`: (mount, block).
    pub access_types: Option<(bool, bool)>,
    /// `access_modes: [SINGLE_NODE_WRITER, ...]`.
    pub access_modes: Option<Vec<String>>,
    /// `fs_types: [ext4, xfs]`.
    pub fs_types: Option<Vec<String>>,
    /// `mount_flags: [noatime]`.
    pub mount_flags: Option<Vec<String>>,
    /// `volume_mount_groups: ["1000"]`.
    pub volume_mount_groups: Option<Vec<String>>,
    /// `max_capabilities: 3`.
    pub max_capabilities: Option<usize>,
}

impl BoundsOverride {
    /// `base` with every key given here replaced.
    pub fn apply(&self, base: &Bounds) -> Bounds {
        let mut out = base.clone();
        if let Some((mount, block)) = self.access_types {
            (out.mount, out.block) = (mount, block);
        }
        let replace = |target: &mut Vec<String>, given: &Option<Vec<String>>| {
            if let Some(v) = given {
                target.clone_from(v);
            }
        };
        replace(&mut out.access_modes, &self.access_modes);
        replace(&mut out.fs_types, &self.fs_types);
        replace(&mut out.mount_flags, &self.mount_flags);
        replace(&mut out.volume_mount_groups, &self.volume_mount_groups);
        if let Some(n) = self.max_capabilities {
            out.max_capabilities = n;
        }
        out
    }
}

/// Reads a bounds mapping (see [`BOUNDS_KEYS`]). Every problem comes with its position:
/// unknown keys, values that are not lists of text, unknown access types and modes, a
/// `max_capabilities` below 1, and bounds that could generate nothing.
pub fn parse_bounds(node: &Node) -> Result<BoundsOverride, (Pos, String)> {
    let Some(entries) = node.as_map() else {
        return Err((node.pos, format!("bounds must be a mapping, not {}", node.describe())));
    };
    let mut out = BoundsOverride::default();
    for (key, value) in entries {
        let name = key.scalar_text().unwrap_or_default();
        match name {
            "access_types" => {
                let types = texts(value, name)?;
                let mut mount_block = (false, false);
                for (t, pos) in &types {
                    match t.as_str() {
                        "mount" => mount_block.0 = true,
                        "block" => mount_block.1 = true,
                        other => return Err((*pos, format!("access_types: unknown access type {other:?}; expected mount or block"))),
                    }
                }
                if types.is_empty() {
                    return Err((value.pos, "access_types must list mount, block or both".to_owned()));
                }
                out.access_types = Some(mount_block);
            }
            "access_modes" => {
                let modes = texts(value, name)?;
                for (m, pos) in &modes {
                    if !AccessMode::ALL.iter().any(|a| a.to_string() == *m) {
                        let all: Vec<String> = AccessMode::ALL.iter().map(ToString::to_string).collect();
                        return Err((*pos, format!("access_modes: unknown access mode {m:?}; expected one of {}", all.join(", "))));
                    }
                }
                out.access_modes = Some(modes.into_iter().map(|(m, _)| m).collect());
            }
            "fs_types" | "mount_flags" | "volume_mount_groups" => {
                let list = Some(texts(value, name)?.into_iter().map(|(t, _)| t).collect());
                match name {
                    "fs_types" => out.fs_types = list,
                    "mount_flags" => out.mount_flags = list,
                    _ => out.volume_mount_groups = list,
                }
            }
            "max_capabilities" => match value.plain() {
                Some(Plain::Int(n)) if (1..=16).contains(&n) => out.max_capabilities = usize::try_from(n).ok(),
                _ => return Err((value.pos, "max_capabilities must be a whole number from 1 to 16".to_owned())),
            },
            other => {
                let hint = super::vars::did_you_mean(other, BOUNDS_KEYS);
                let hint = if hint.is_empty() { format!("; keys: {}", BOUNDS_KEYS.join(", ")) } else { hint };
                return Err((key.pos, format!("unknown key {other:?} in bounds{hint}")));
            }
        }
    }
    Ok(out)
}

/// A list of text values (a single scalar counts as a list of one), with positions.
pub(crate) fn texts(node: &Node, what: &str) -> Result<Vec<(String, Pos)>, (Pos, String)> {
    let one = |n: &Node| match n.plain() {
        Some(Plain::Str(_) | Plain::Int(_) | Plain::Float(_) | Plain::Bool(_)) => {
            Ok((n.scalar_text().unwrap_or_default().to_owned(), n.pos))
        }
        _ => Err((n.pos, format!("{what} must be a list of text values, found {}", n.describe()))),
    };
    match node.as_seq() {
        Some(items) => items.iter().map(one).collect(),
        None => one(node).map(|t| vec![t]),
    }
}
