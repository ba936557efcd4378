//! README.md stays true: its csi-sanity migration table is the one the code applies, and its
//! complete suite example loads.

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

#[test]
fn the_migration_table_lists_every_csi_sanity_flag_as_translated() {
    let readme = readme();
    for (flag, ours) in csi_conform::compat::migration_table() {
        let row = format!("| `{flag}` | {ours} |");
        assert!(readme.contains(&row), "README.md lacks the row {row}");
    }
    let rows = readme.lines().filter(|l| l.starts_with("| `-csi.") || l.starts_with("| `-ginkgo.") || l.starts_with("| `-version")).count();
    assert_eq!(rows, csi_conform::compat::migration_table().len(), "no row for a flag the code does not know");
}

#[test]
fn the_suite_authors_example_is_a_valid_suite() {
    let readme = readme();
    let start = readme.find("A complete suite:\n\n```yaml\n").expect("the suite example") + "A complete suite:\n\n```yaml\n".len();
    let text = &readme[start..start + readme[start..].find("```").unwrap()];
    let suite = csi_conform::suite::load_str("README.md", text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(suite.scenarios().len(), 1);
}

#[test]
fn the_readme_shows_the_current_spec_coverage() {
    let suites = csi_conform::suite::builtin();
    let rules = csi_conform::rules::covering().iter().map(|(rule, ids)| (rule.as_str(), ids.as_slice()));
    let pairs: Vec<(&str, &[String])> =
        suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).chain(rules).collect();
    let coverage = csi_conform::spec::coverage(csi_conform::spec::builtin(), pairs);
    let rendered = coverage.render(false);
    let readme = readme();
    for wanted in ["testable requirements covered", "all   "] {
        let line = rendered.lines().find(|l| l.contains(wanted)).unwrap();
        assert!(readme.contains(line), "README.md should show `{line}` (csi-conform list --spec)");
    }
}
