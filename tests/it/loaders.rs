//! Every loader of user files (suites, parameter maps, secrets files, expect-failures lists)
//! takes arbitrary text, however broken, and answers with a value or an error, never a panic.

use std::path::Path;

use csi_conform::{config, report::ExpectedFailures, secrets::Secrets, suite};
use proptest::prelude::*;

/// Pieces of the files these loaders read, and of YAML at its strangest, so that generated
/// texts get past the parser often and into each loader's own checks.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("CreateVolumeSecret:\n".to_owned()),
        Just("CreateVolumeSecrets:\n".to_owned()),
        Just("  password: hunter2\n".to_owned()),
        Just("  nested: { a: [1, 2] }\n".to_owned()),
        Just("NodeStageVolumeSecret: ~\n".to_owned()),
        Just("iops: 3000\n".to_owned()),
        Just("clusterId: \"8809226123290901444\"\n".to_owned()),
        Just("controller.create-volume.no-name: known\n".to_owned()),
        Just("x.y: \"\"\n".to_owned()),
        Just("suite: s\ntitle: t\nscenarios:\n  - id: a\n    title: x\n    steps:\n".to_owned()),
        Just("      - call: CreateVolume\n        request: { name: \"${name}\" }\n".to_owned()),
        Just("&a [*a, *a]\n".to_owned()),
        Just("*undefined\n".to_owned()),
        Just("!!binary x\n".to_owned()),
        Just("!custom { }\n".to_owned()),
        Just("? [complex, key]\n: value\n".to_owned()),
        Just("---\n".to_owned()),
        Just("...\n".to_owned()),
        Just("%YAML 1.2\n".to_owned()),
        Just("key: 99999999999999999999999999999\n".to_owned()),
        Just("key: -.inf\n".to_owned()),
        Just("\t- tab\n".to_owned()),
        Just("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n".to_owned()),
        Just("{a: {b: {c: {d: {e: {f: {}}}}}}}\n".to_owned()),
        Just("- a\n- b\n".to_owned()),
        Just("\"unterminated\n".to_owned()),
        Just("key: |\n  block\n text\n".to_owned()),
        Just("ключ: значение ✓\n".to_owned()),
        "[ -~\\t\\n]{0,40}",
    ]
}

/// Feeds `text` to every loader; each may refuse it, none may panic.
fn load_everything(text: &str) {
    let file = Path::new("fuzz.yaml");
    let _ = suite::load_str("fuzz.yaml", text);
    let _ = config::parse_string_map(text, file);
    let _ = Secrets::parse(text, file);
    let _ = ExpectedFailures::parse_str(text, file);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics_a_loader(text in "\\PC{0,300}") {
        load_everything(&text);
    }

    #[test]
    fn yaml_like_text_never_panics_a_loader(parts in proptest::collection::vec(fragment(), 0..20)) {
        load_everything(&parts.concat());
    }
}
