//! Loading suites: every kind of error names `file:line:col` and what is wrong, all errors
//! of a file are reported at once, valid suites load, duplicates name both places.

use std::path::{Path, PathBuf};

use csi_conform::suite::{self, LoadErrors};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites").join(name)
}

/// Loads a text and returns its error lines.
fn errors(text: &str) -> Vec<String> {
    match suite::load_str("t.yaml", text) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => e.to_string().lines().map(str::to_owned).collect(),
    }
}

fn one_scenario(steps: &str) -> String {
    format!("suite: t\ntitle: T\nscenarios:\n  - id: s\n    title: S\n    steps:\n{steps}")
}

#[test]
fn the_error_fixture_reports_every_problem_with_its_position() {
    let origin = fixture("errors.yaml");
    let e: LoadErrors = suite::load_file(&origin).unwrap_err();
    let f = origin.display().to_string();
    let lines: Vec<String> = e.to_string().lines().map(|l| l.replace(&f, "errors.yaml")).collect();
    let expected = [
        "errors.yaml:6:5: unknown key \"tilte\" in a scenario; did you mean title?",
        "errors.yaml:8:15: unknown RPC \"CreateVolum\"; did you mean CreateVolume?",
        "errors.yaml:11:11: unknown field: csi.v1.CreateVolumeRequest has no field \"nmae\"; did you mean name?",
        "errors.yaml:12:45: field capacity_range.required_bytes (int64) expects an integer, got \"lots\"",
        "errors.yaml:13:32: field volume_capabilities is repeated and expects a list, got a mapping",
        "errors.yaml:14:23: field parameters is a map and expects a mapping, got a list",
        "errors.yaml:19:9: unknown key \"expects\" in a call step; did you mean expect?",
        "errors.yaml:25:26: undefined variable \"nmae\" in ${nmae}; did you mean name? (variables: the built-ins and earlier saves of this scenario)",
        "errors.yaml:28:22: ${vol.volume_idd}: csi.v1.Volume has no field \"volume_idd\"; did you mean volume_id?",
        "errors.yaml:29:51: invalid regex \"([a-z\": unclosed character class",
        "errors.yaml:30:22: undefined variable \"later\" in ${later} (variables: the built-ins and earlier saves of this scenario)",
        "errors.yaml:30:34: unknown key \"equal\" in an assertion; did you mean equals?",
        "errors.yaml:31:16: unknown check \"list-all-volume\"; did you mean list-all-volumes? (`csi-conform list --checks` shows them)",
        "errors.yaml:33:31: argument `is` of check path-state: expects one of absent, directory, file, exists, mount-point, not-mount-point, read-only-mount, not \"mounted\"",
        "errors.yaml:36:9: duplicate scenario id \"errors.a\": also defined at errors.yaml:4:9",
    ];
    for line in expected {
        assert!(lines.iter().any(|l| l == line), "missing:\n{line}\nin:\n{}", lines.join("\n"));
    }
    let code = lines.iter().find(|l| l.starts_with("errors.yaml:15:25: ")).expect("bad code reported");
    assert!(
        code.starts_with(
            "errors.yaml:15:25: unknown code \"NOT_FOUNDD\"; did you mean NOT_FOUND? (valid codes: OK, CANCELLED,"
        ),
        "{code}"
    );
    let mode = lines.iter().find(|l| l.starts_with("errors.yaml:18:56: ")).expect("bad enum reported");
    assert!(mode.contains("has no value \"SINGLE_WRITER\"; did you mean one of SINGLE_NODE_WRITER, SINGLE_NODE_MULTI_WRITER? (valid names: UNKNOWN, SINGLE_NODE_WRITER,"), "{mode}");
    let cap = lines.iter().find(|l| l.starts_with("errors.yaml:22:16: ")).expect("bad capability reported");
    assert!(
        cap.contains("unknown controller capability \"CREATE_VOLUME\"; expected one of CREATE_DELETE_VOLUME"),
        "{cap}"
    );
    assert_eq!(lines.len(), expected.len() + 3, "{}", lines.join("\n"));
}

#[test]
fn step_and_assertion_shapes_are_checked() {
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        assert: []\n")),
        ["t.yaml:7:9: a step has exactly one of call, assert, check, property; this one has call and assert"]
    );
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        expect: { code: OK, any_error: true }\n")),
        ["t.yaml:8:17: expect has both `code` and `any_error: true`; use one"]
    );
    assert_eq!(
        errors(&one_scenario(
            "      - call: Probe\n        expect: { code: NOT_FOUND, fields: [{ path: ready, absent: true }] }\n"
        )),
        ["t.yaml:8:44: fields are checked only on an OK answer, but expect accepts NOT_FOUND"]
    );
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        expect: { fields: [{ path: redy, absent: true }] }\n")),
        ["t.yaml:8:36: path \"redy\": csi.v1.ProbeResponse has no field \"redy\"; did you mean ready?"]
    );
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        repeat: 0\n")),
        ["t.yaml:8:17: repeat must be a whole number of at least 1, not \"0\""]
    );
    assert_eq!(
        errors(&one_scenario(
            "      - call: Probe\n        poll: { until: { path: ready, equals: true }, timeout: soon }\n"
        )),
        ["t.yaml:8:64: timeout must be a duration such as 500ms, 10s or 2m, not \"soon\""]
    );
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        secrets: CreateVolumeSecrets\n")),
        [
            "t.yaml:8:18: secrets must be auto, none or a secrets-file key, not \"CreateVolumeSecrets\"; did you mean CreateVolumeSecret?"
        ]
    );
    assert_eq!(
        errors(&one_scenario("      - when: controller:LIST\n        call: Probe\n")),
        [
            "t.yaml:7:15: unknown controller capability \"LIST\"; expected one of CREATE_DELETE_VOLUME, PUBLISH_UNPUBLISH_VOLUME, LIST_VOLUMES, GET_CAPACITY, CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS, CLONE_VOLUME, PUBLISH_READONLY, EXPAND_VOLUME, LIST_VOLUMES_PUBLISHED_NODES, VOLUME_CONDITION, GET_VOLUME, SINGLE_NODE_MULTI_WRITER, MODIFY_VOLUME, GET_SNAPSHOT, GET_VOLUME_HEALTH, LIST_VOLUME_HEALTH"
        ]
    );
    assert_eq!(
        errors(&one_scenario("      - call: Probe\n        save: { name: ready }\n")),
        ["t.yaml:8:17: \"name\" is a built-in variable and cannot be saved to"]
    );
    assert_eq!(
        errors(&one_scenario("      - assert: [{ value: \"${paths.stage}\", non_empty: true }]\n")),
        ["t.yaml:7:27: ${paths.stage}: no member \"stage\"; did you mean one of staging, target?"]
    );
    assert_eq!(
        errors(&one_scenario("      - check: path-state\n        args: { is: absent, pth: /x }\n")),
        [
            "t.yaml:8:15: check path-state needs argument `path`",
            "t.yaml:8:29: unknown key \"pth\" in the args of check path-state; did you mean path?",
        ]
    );
}

#[test]
fn suite_and_scenario_keys_are_checked() {
    assert_eq!(
        errors("suite: Bad_Id\ntitle: T\nsenarios: []\n"),
        [
            "t.yaml:1:1: the suite needs `scenarios`",
            "t.yaml:1:8: suite id \"Bad_Id\" must use only a-z, 0-9 and '-'",
            "t.yaml:3:1: unknown key \"senarios\" in the suite; did you mean scenarios?",
        ]
    );
    assert_eq!(
        errors(
            "suite: t\ntitle: T\nscenarios:\n  - id: s\n    title: S\n    requires_option: attach\n    requires_nodes: two\n    steps: [{ call: Probe }]\n"
        ),
        [
            "t.yaml:6:22: unknown option \"attach\"; known options: attach_limit, restart, restart_node, restart_controller",
            "t.yaml:7:21: requires_nodes must be a whole number of at least 1, not \"two\"",
        ]
    );
    assert_eq!(
        errors(
            "suite: t\ntitle: T\nscenarios:\n  - id: s\n    title: S\n    exclusive: [volumes, volume, volumes]\n    steps: [{ call: Probe }]\n  - id: u\n    title: U\n    serial: true\n    exclusive: snapshots\n    steps: [{ call: Probe }]\n"
        ),
        [
            "t.yaml:6:26: unknown pool \"volume\" in exclusive; known: volumes, snapshots, existing-volumes",
            "t.yaml:6:34: pool volumes is named twice in exclusive",
            "t.yaml:11:16: exclusive is for a scenario that may run beside others; serial: true already runs it alone",
        ]
    );
    assert_eq!(errors(""), ["t.yaml:1:1: the suite is empty"]);
    assert_eq!(errors("a: [1, 2\n"), ["t.yaml:2:1: invalid YAML: while parsing a flow sequence, expected ',' or ']'"]);
}

#[test]
fn a_valid_suite_loads_with_its_metadata() {
    let suite = suite::load_file(&fixture("valid.yaml")).unwrap();
    assert_eq!(suite.id(), "valid");
    assert!(suite.source().ends_with("tests/fixtures/suites/valid.yaml"));
    let s = &suite.scenarios()[0];
    assert_eq!(s.id(), "valid.lifecycle.full");
    assert_eq!(s.parity(), [37, 89]);
    assert_eq!(s.tags(), ["lifecycle", "positive"]);
    assert_eq!(s.spec(), ["CreateVolume.idempotent", "DeleteVolume.deletes"]);
    assert_eq!(s.requires().capabilities.len(), 2, "the suite's requirement is merged in");
    assert_eq!(s.source().pos.line, 6);
    assert!(suite.scenarios()[1].serial());
    assert!(suite.scenarios()[1].exclusive().is_empty());
    assert!(suite.scenarios()[1].implied_requires().is_empty());
    assert_eq!(s.implied_requires().len(), 1);
}

#[test]
fn duplicate_ids_across_files_name_both_places() {
    let a = suite::load_file(&fixture("dup_a.yaml")).unwrap();
    let b = suite::load_file(&fixture("dup_b.yaml")).unwrap();
    let text = suite::check_unique(&[a.clone(), b.clone()]).unwrap_err().to_string();
    let (fa, fb) = (fixture("dup_a.yaml").display().to_string(), fixture("dup_b.yaml").display().to_string());
    assert_eq!(
        text,
        format!(
            "{fb}:1:8: duplicate suite id \"dup-a\": also defined at {fa}:1:8\n\
             {fb}:8:9: duplicate scenario id \"dup-a.same\": also defined at {fa}:4:9"
        )
    );
    suite::check_unique(&[a]).unwrap();
}

#[test]
fn builtin_suites_load() {
    let suites = suite::builtin();
    assert_eq!(suites.len(), suite::BUILTIN.len());
    suite::check_unique(&suites).unwrap();
    assert!(suite::checks().any(|(name, _)| name == "path-state"));
}

#[test]
fn standalone_requests_parse_and_build_with_positions() {
    let method = csi_conform::proto::method("CreateVolume").unwrap();
    let request = suite::parse_request("<request>", "name: x\ncapacity_range: { required_bytes: 1Gi }\n").unwrap();
    let e = suite::build_request(&method, &request, &suite::Vars::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "<request>:2:35: field capacity_range.required_bytes (int64) expects an integer, got \"1Gi\""
    );
    let ok = suite::parse_request("<request>", "name: x").unwrap();
    assert!(suite::build_request(&method, &ok, &suite::Vars::new()).is_ok());
    let empty = suite::parse_request("<request>", "").unwrap();
    assert!(suite::build_request(&method, &empty, &suite::Vars::new()).is_ok());
}

#[test]
fn an_unquoted_negated_condition_gets_a_hint() {
    assert_eq!(
        errors(&one_scenario("      - when: !node:STAGE_UNSTAGE_VOLUME\n        call: Probe\n")),
        [
            "t.yaml:7:15: unsupported tag !node:STAGE_UNSTAGE_VOLUME; a negated condition must be quoted: \"!node:STAGE_UNSTAGE_VOLUME\""
        ]
    );
}

#[test]
fn one_of_takes_a_list_variable_for_order_free_comparisons() {
    let suite = |test: &str| {
        format!(
            "suite: t\ntitle: T\nscenarios:\n  - id: a\n    title: A\n    steps:\n      - call: GetPluginCapabilities\n        request: {{}}\n        save: {{ caps: capabilities }}\n      - assert:\n          - {{ value: \"${{caps}}\", each: {{ one_of: {test} }} }}\n"
        )
    };
    assert!(suite::load_str("t.yaml", &suite("\"${caps}\"")).is_ok());
    let errs = suite::load_str("t.yaml", &suite("caps")).unwrap_err().to_string();
    assert!(errs.contains("one_of must be a non-empty list or a \"${variable}\" holding one"), "{errs}");
}

/// A scenario's paths are made only when it may use them: it names `${paths...}`, or may call
/// a node RPC that takes a path (itself, or through a named check).
#[test]
fn a_scenario_uses_its_paths_when_it_names_them_or_may_call_a_node_rpc_with_a_path() {
    let uses = |steps: &str| {
        let text = format!("suite: t\ntitle: T\nscenarios:\n  - id: s\n    title: S\n    steps:\n{steps}");
        let suite = suite::load_str("t.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
        suite.scenarios()[0].uses_paths()
    };
    assert!(!uses("      - call: NodeGetInfo\n      - call: Probe\n"));
    assert!(!uses("      - call: CreateVolume\n        request: { name: \"${name}\", volume_capabilities: [\"${capability}\"] }\n"));
    assert!(uses("      - check: path-state\n        args: { path: \"${paths.dir}\", is: directory }\n"));
    assert!(uses("      - check: path-state\n        args: { path: \"${ paths.target }/x\", is: absent }\n"));
    // An argument check that sends no path still calls an RPC that takes one.
    assert!(uses("      - call: NodeUnpublishVolume\n        request: { volume_id: v }\n        expect: { code: INVALID_ARGUMENT }\n"));
    assert!(uses("      - check: lifecycle\n"));
    assert!(!uses("      - check: vvc-reconcile\n        args: { volume_id: v, capabilities: [\"${capability}\"] }\n"));
    // Which RPCs take a node path is read from the requests' fields.
    let mut taking: Vec<String> =
        csi_conform::proto::all_methods().map(|m| m.name().to_owned()).filter(|m| suite::takes_node_path(m)).collect();
    taking.sort();
    assert_eq!(
        taking,
        [
            "NodeExpandVolume",
            "NodeGetVolumeHealth",
            "NodeGetVolumeStats",
            "NodePublishVolume",
            "NodeStageVolume",
            "NodeUnpublishVolume",
            "NodeUnstageVolume"
        ]
    );
}
