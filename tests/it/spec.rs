//! The requirement inventory against the suites: every built-in scenario names requirements
//! that exist, every requirement is covered or explained, `list --spec` reports the numbers
//! the inventory and suites give, and the loader's errors for a bad `spec:` name the line.

use std::collections::BTreeMap;

use csi_conform::{spec, suite};

use crate::support::csi_conform;

/// What covers requirements: the built-in scenarios and the response rules.
fn builtin_pairs(suites: &[suite::Suite]) -> Vec<(&str, &[String])> {
    let rules = csi_conform::rules::covering().iter().map(|(rule, ids)| (rule.as_str(), ids.as_slice()));
    suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).chain(rules).collect()
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

#[tokio::test]
async fn list_spec_reports_the_inventorys_numbers() {
    let cwd = tempfile::tempdir().unwrap();
    let out = csi_conform(&["list", "--spec", "--format", "json"], cwd.path()).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // The expected numbers, counted here from the inventory and the suites directly.
    let inventory = spec::builtin();
    let suites = suite::builtin();
    let mut named: BTreeMap<&str, usize> = BTreeMap::new();
    for sc in suites.iter().flat_map(|s| s.scenarios()) {
        for id in sc.spec() {
            *named.entry(id.as_str()).or_default() += 1;
        }
    }
    // The response rules cover their requirements too.
    for rule in csi_conform::rules::RULES {
        *named.entry(rule.requirement).or_default() += 1;
    }
    let mut per: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    for r in &inventory.requirements {
        let row = per.entry(r.rpc.as_str()).or_default();
        row[0] += 1;
        if named.contains_key(r.id.as_str()) {
            row[1] += 1;
        } else if r.untestable.is_some() {
            row[2] += 1;
        } else if r.gap.is_some() {
            row[3] += 1;
        }
    }
    let sum = |i: usize| per.values().map(|r| r[i]).sum::<usize>();
    let overall = &json["overall"];
    assert_eq!(overall["total"], inventory.requirements.len());
    assert_eq!(overall["covered"], sum(1));
    assert_eq!(overall["untestable"], sum(2));
    assert_eq!(overall["gap"], sum(3));
    assert_eq!(overall["testable"], sum(0) - sum(2));
    let percent = sum(1) as f64 * 100.0 / (sum(0) - sum(2)) as f64;
    assert_eq!(overall["coverage_percent"].as_f64().unwrap(), (percent * 10.0).round() / 10.0);
    let rows = json["rpcs"].as_array().unwrap();
    assert_eq!(rows.len(), per.len());
    for row in rows {
        let rpc = row["rpc"].as_str().unwrap();
        let want = per[rpc];
        assert_eq!([&row["total"], &row["covered"], &row["untestable"], &row["gap"]], want.map(serde_json::Value::from).each_ref(), "{rpc}");
    }
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
        text.contains(&format!("{} of {} testable requirements covered ({percent:.1}%)", sum(1), sum(0) - sum(2))),
        "{text}"
    );
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
