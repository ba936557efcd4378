//! The requirement inventory against the suites: every built-in scenario names requirements
//! that exist, every requirement is covered or explained, `list --spec` reports the numbers
//! the inventory and suites give, and the loader's errors for a bad `spec:` name the line.

use csi_conform::{spec, suite};

use crate::support::csi_conform;

/// What covers requirements: the built-in scenarios and the response rules.
fn builtin_pairs(suites: &[suite::Suite]) -> Vec<(&str, &[String])> {
    let rules = csi_conform::rules::covering().iter().map(|(rule, ids)| (rule.as_str(), ids.as_slice()));
    suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).chain(rules).collect()
}

/// The opt-in suites, loaded.
fn opt_in_suites() -> Vec<suite::Suite> {
    suite::OPT_IN.iter().map(|(name, _)| suite::opt_in_suite(name).unwrap().unwrap()).collect()
}

/// What the opt-in suites check: (suite name, requirement ids), scenario by scenario.
fn opt_in_pairs(suites: &[suite::Suite]) -> Vec<(&str, &[String])> {
    suites.iter().flat_map(|s| s.scenarios().iter().map(move |sc| (s.id(), sc.spec()))).collect()
}

#[test]
fn every_builtin_scenario_names_requirements_the_inventory_has() {
    let suites = suite::builtin();
    assert_eq!(suites.len(), suite::BUILTIN.len(), "every built-in suite loads");
    let mut missing = Vec::new();
    for sc in suites.iter().flat_map(|s| s.scenarios()) {
        if sc.spec().is_empty() {
            missing.push(sc.id().to_owned());
        }
        for id in sc.spec() {
            assert!(spec::lookup(id).is_some(), "{} names {id}, which no inventory has", sc.id());
        }
    }
    assert!(missing.is_empty(), "built-in scenarios naming no requirement (give them `spec: [ids]`): {missing:?}");
}

#[test]
fn every_requirement_is_covered_or_explained_and_coverage_is_at_least_90_percent() {
    for version in csi_conform::version::SpecVersion::ALL {
        requirements_of_one_version_are_covered_or_explained(version);
    }
}

fn requirements_of_one_version_are_covered_or_explained(version: csi_conform::version::SpecVersion) {
    let suites = suite::builtin();
    let coverage = spec::coverage(spec::for_version(version), builtin_pairs(&suites));
    let unaccounted: Vec<&str> = coverage.unaccounted().iter().map(|r| r.id.as_str()).collect();
    assert!(unaccounted.is_empty(), "requirements with neither a scenario nor a reason: {unaccounted:?}");
    assert!(coverage.contradictions.is_empty(), "scenarios naming untestable requirements: {:?}", coverage.contradictions);
    assert!(coverage.unknown.is_empty(), "{:?}", coverage.unknown);
    for (r, status) in coverage.inventory.requirements.iter().zip(&coverage.statuses) {
        if let spec::Status::Covered(_) = status {
            assert!(r.gap.is_none(), "{} is covered now: drop its `gap:` reason", r.id);
        }
    }
    let (_, all) = coverage.tallies();
    assert!(all.percent() >= 90.0, "only {:.1}% of the testable requirements are covered", all.percent());
}

#[test]
fn a_requirement_with_neither_scenarios_nor_a_reason_is_reported() {
    let text = "version: v1.12.0\nbase: https://example.invalid/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                - {id: X.covered, rpc: X, anchor: error-scheme, level: MUST, summary: s}\n  \
                - {id: X.orphan, rpc: X, anchor: error-scheme, level: MUST, summary: s}\n";
    let inventory = spec::load_str("inv.yaml", text).unwrap();
    let ids = vec!["X.covered".to_owned()];
    let coverage = spec::coverage(&inventory, [("s.one", ids.as_slice())]);
    assert_eq!(coverage.unaccounted().iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["X.orphan"]);
    assert!(coverage.render(true).contains("NOT ACCOUNTED FOR"));
}

/// The classification itself, on an inventory small enough to know every answer: named by a
/// scenario is covered (even with a `gap:` left, or when the inventory calls it untestable,
/// which is a contradiction); else `untestable:`, else `gap:`, else unaccounted.
#[test]
fn the_classification_of_a_small_inventory_is_exact() {
    let text = "version: v1.12.0\nbase: https://example.invalid/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                - {id: X.covered, rpc: X, anchor: error-scheme, level: MUST, summary: s, gap: not yet}\n  \
                - {id: X.untestable, rpc: X, anchor: error-scheme, level: MUST, summary: s, untestable: backend}\n  \
                - {id: X.gap, rpc: X, anchor: error-scheme, level: SHOULD, summary: s, gap: later}\n  \
                - {id: Y.orphan, rpc: Y, anchor: error-scheme, level: MUST, summary: s}\n  \
                - {id: Y.named-untestable, rpc: Y, anchor: error-scheme, level: MAY, summary: s, untestable: never}\n";
    let inventory = spec::load_str("inv.yaml", text).unwrap();
    let one = vec!["X.covered".to_owned(), "Y.named-untestable".to_owned()];
    let two = vec!["X.covered".to_owned(), "Z.unknown".to_owned()];
    let coverage = spec::coverage(&inventory, [("s.one", one.as_slice()), ("s.two", two.as_slice())]);
    use spec::Status::*;
    assert_eq!(
        coverage.statuses,
        [
            Covered(vec!["s.one".into(), "s.two".into()]),
            Untestable("backend".into()),
            Gap("later".into()),
            Unaccounted,
            Covered(vec!["s.one".into()]),
        ]
    );
    assert_eq!(coverage.contradictions, [("s.one".to_owned(), "Y.named-untestable".to_owned())]);
    assert_eq!(coverage.unknown, [("s.two".to_owned(), "Z.unknown".to_owned())]);
    let (rows, all) = coverage.tallies();
    let tally = |total, covered, untestable, gap, unaccounted| spec::Tally { total, covered, untestable, opt_in: 0, gap, unaccounted };
    assert_eq!(rows, [("X".to_owned(), tally(3, 1, 1, 1, 0)), ("Y".to_owned(), tally(2, 1, 0, 0, 1))]);
    assert_eq!(all, tally(5, 2, 1, 1, 1));
    assert_eq!((all.testable(), all.percent()), (4, 50.0));
    assert!(coverage.render(false).contains("2 of 4 testable requirements covered (50.0%); 1 untestable, 0 checked only by opt-in suites, 1 gaps, 1 NOT ACCOUNTED FOR"));
}

#[tokio::test]
async fn list_spec_reports_the_inventorys_numbers() {
    let cwd = tempfile::tempdir().unwrap();
    let out = csi_conform(&["list", "--spec", "--format", "json"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // The command reports what the library computes (whose classification is pinned on a
    // small inventory in `the_classification_of_a_small_inventory_is_exact`), not a second
    // classification written here.
    let inventory = spec::builtin();
    let suites = suite::builtin();
    let opt_in = opt_in_suites();
    let coverage = spec::coverage_with_opt_in(inventory, builtin_pairs(&suites), opt_in_pairs(&opt_in));
    let (per, all) = coverage.tallies();
    assert_eq!(overall_opt_in(&json), all.opt_in);
    let overall = &json["overall"];
    assert_eq!(overall["total"], inventory.requirements.len());
    assert_eq!([&overall["covered"], &overall["untestable"], &overall["gap"]], [all.covered, all.untestable, all.gap].map(serde_json::Value::from).each_ref());
    assert_eq!(overall["testable"], all.total - all.untestable);
    let percent = all.covered as f64 * 100.0 / (all.total - all.untestable) as f64;
    assert_eq!(overall["coverage_percent"].as_f64().unwrap(), (percent * 10.0).round() / 10.0);
    let rows = json["rpcs"].as_array().unwrap();
    let got: Vec<(String, [usize; 4])> = rows
        .iter()
        .map(|row| {
            let n = |k: &str| row[k].as_u64().unwrap() as usize;
            (row["rpc"].as_str().unwrap().to_owned(), [n("total"), n("covered"), n("untestable"), n("gap")])
        })
        .collect();
    let want: Vec<(String, [usize; 4])> = per.iter().map(|(rpc, t)| (rpc.clone(), [t.total, t.covered, t.untestable, t.gap])).collect();
    assert_eq!(got, want);
    let sum = |i: usize| got.iter().map(|(_, r)| r[i]).sum::<usize>();
    assert_eq!([sum(0), sum(1), sum(2), sum(3)], [all.total, all.covered, all.untestable, all.gap], "the rows add up to the overall line");
    let reqs = json["requirements"].as_array().unwrap();
    assert_eq!(reqs.len(), inventory.requirements.len());
    let one = reqs.iter().find(|r| r["id"] == "CreateVolume.errors.already-exists").unwrap();
    assert_eq!(one["code"], "ALREADY_EXISTS");
    assert_eq!(one["link"], "https://github.com/container-storage-interface/spec/blob/v1.12.0/spec.md#createvolume-errors");
    assert!(one["scenarios"].as_array().unwrap().iter().any(|s| s == "controller.create-volume.same-name-other-capacity"));
    // A requirement no scenario names is covered by the response rule that checks it.
    let rule = reqs.iter().find(|r| r["id"] == "ErrorScheme.details.empty").unwrap();
    assert_eq!(rule["status"], "covered");
    assert!(rule["scenarios"].as_array().unwrap().iter().any(|s| s == "rule answer.error.details-empty"), "{rule}");

    let table = csi_conform(&["list", "--spec"], cwd.path()).await;
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains(&format!("{} of {} testable requirements covered ({percent:.1}%)", all.covered, all.total - all.untestable)),
        "{text}"
    );
}

fn overall_opt_in(json: &serde_json::Value) -> usize {
    json["overall"]["opt_in"].as_u64().unwrap() as usize
}

/// A requirement only an opt-in suite names is that suite's (not a gap, not covered), its
/// `gap:` reason notwithstanding; a default scenario naming it makes it covered; an untestable
/// one stays untestable.
#[test]
fn a_requirement_only_an_opt_in_suite_checks_is_its_own_status() {
    let text = "version: v1.12.0\nbase: https://example.invalid/spec.md\nheadings: [Error Scheme]\nrequirements:\n  \
                - {id: X.both, rpc: X, anchor: error-scheme, level: MUST, summary: s}\n  \
                - {id: X.stress, rpc: X, anchor: error-scheme, level: SHOULD, summary: s, gap: only --suite stress}\n  \
                - {id: X.gap, rpc: X, anchor: error-scheme, level: SHOULD, summary: s, gap: later}\n  \
                - {id: X.untestable, rpc: X, anchor: error-scheme, level: MUST, summary: s, untestable: backend}\n";
    let inventory = spec::load_str("inv.yaml", text).unwrap();
    let default = vec!["X.both".to_owned()];
    let stress = vec!["X.both".to_owned(), "X.stress".to_owned(), "X.untestable".to_owned()];
    let disruption = vec!["X.stress".to_owned()];
    let coverage = spec::coverage_with_opt_in(
        &inventory,
        [("s.one", default.as_slice())],
        [("stress", stress.as_slice()), ("disruption", disruption.as_slice()), ("stress", disruption.as_slice())],
    );
    use spec::Status::*;
    assert_eq!(
        coverage.statuses,
        [
            Covered(vec!["s.one".into()]),
            OptIn(vec!["stress".into(), "disruption".into()]),
            Gap("later".into()),
            Untestable("backend".into()),
        ]
    );
    let (_, all) = coverage.tallies();
    assert_eq!(all, spec::Tally { total: 4, covered: 1, untestable: 1, opt_in: 1, gap: 1, unaccounted: 0 });
    // Not counted as covered: the default run does not check it.
    assert_eq!((all.testable(), all.percent()), (3, 100.0 / 3.0));
    let text = coverage.render(true);
    assert!(text.contains("1 of 3 testable requirements covered (33.3%); 1 untestable, 1 checked only by opt-in suites, 1 gaps"), "{text}");
    assert!(text.contains("checked by the opt-in suite stress (--suite stress)"), "{text}");
    let json = coverage.to_json();
    let row = json["requirements"].as_array().unwrap().iter().find(|r| r["id"] == "X.stress").unwrap().clone();
    assert_eq!((row["status"].as_str(), row["suites"].clone()), (Some("opt-in"), serde_json::json!(["stress", "disruption"])));
    assert_eq!(overall_opt_in(&json), 1);
}

/// `list --spec`: `General.concurrency.graceful`, which only `--suite stress` checks, is
/// the opt-in suite's, not a gap; with `--suite stress` it is covered.
#[tokio::test]
async fn list_spec_credits_the_opt_in_suites() {
    let cwd = tempfile::tempdir().unwrap();
    let (row, gaps) = graceful_in_list_spec(cwd.path(), &[]).await;
    assert_eq!(row["status"], "opt-in", "{row}");
    assert_eq!(row["suites"], serde_json::json!(["stress"]));
    assert_eq!(gaps, 0);
    let (row, _) = graceful_in_list_spec(cwd.path(), &["--suite", "stress"]).await;
    assert_eq!(row["status"], "covered", "{row}");
    assert!(row["scenarios"].as_array().unwrap().iter().any(|s| s == "stress.create.same-name-at-once"), "{row}");
}

/// `General.concurrency.graceful`'s row of `list --spec --format json ARGS`, and the overall gaps.
async fn graceful_in_list_spec(cwd: &std::path::Path, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let args: Vec<&str> = ["list", "--spec", "--format", "json"].iter().chain(args).copied().collect();
    let out = csi_conform(&args, cwd).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = json["requirements"].as_array().unwrap().iter().find(|r| r["id"] == "General.concurrency.graceful").unwrap().clone();
    (row, json["overall"]["gap"].clone())
}

#[test]
fn a_spec_line_in_the_old_free_text_form_is_refused_with_its_line_and_the_ids_to_use() {
    let text = "suite: t\ntitle: T\nscenarios:\n  - id: a\n    title: A\n    spec: CreateVolume Errors\n    steps:\n      - call: Probe\n        request: {}\n";
    let errs = suite::load_str("t.yaml", text).unwrap_err().to_string();
    assert!(errs.starts_with("t.yaml:6:11: unknown requirement id \"CreateVolume Errors\""), "{errs}");
    assert!(errs.contains("`spec:` takes a list of requirement ids"), "{errs}");
    assert!(errs.contains("ids of CreateVolume: CreateVolume.implemented"), "it lists the RPC's ids: {errs}");

    let text = text.replace("spec: CreateVolume Errors", "spec: [CreateVolume.idempotent, CreateVolume.idempotentt]");
    let errs = suite::load_str("t.yaml", &text).unwrap_err().to_string();
    assert!(errs.starts_with("t.yaml:6:37: unknown requirement id \"CreateVolume.idempotentt\""), "{errs}");

    let ok = text.replace("CreateVolume.idempotentt", "DeleteVolume.idempotent");
    let suite = suite::load_str("t.yaml", &ok).unwrap();
    assert_eq!(suite.scenarios()[0].spec(), ["CreateVolume.idempotent", "DeleteVolume.idempotent"]);
}
