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
