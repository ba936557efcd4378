//! csi-sanity's own spec texts (`suites/csi-sanity-specs.txt`, built in), which `--focus` and
//! `--skip` match so that a csi-sanity `--ginkgo.focus` selects the scenarios covering those
//! specs (the scenarios' `parity:` case numbers name them).

use std::collections::BTreeMap;

/// csi-sanity's spec texts by case number, embedded at build time.
pub const SPEC_TEXTS: &str = include_str!("../../../../suites/csi-sanity-specs.txt");

/// csi-sanity's full spec text of a case (ginkgo's: containers and It joined by spaces), e.g.
/// `Node Service NodeGetInfo should return appropriate values`.
pub fn spec_text(case: u32) -> Option<&'static str> {
    static TEXTS: std::sync::OnceLock<BTreeMap<u32, &'static str>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        SPEC_TEXTS
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('\t'))
            .filter_map(|(n, text)| Some((n.trim().parse().ok()?, text.trim())))
            .collect()
    });
    texts.get(&case).copied()
}
