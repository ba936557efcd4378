//! The book stays true to the code: its csi-sanity migration table (docs/csi-sanity.md) is the
//! one the code applies, its complete suite example (docs/authoring.md) loads, and the spec
//! coverage it shows (docs/checks.md) is today's.

fn page(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

#[test]
fn the_migration_table_lists_every_csi_sanity_flag_as_translated() {
    let readme = page("docs/csi-sanity.md");
    for (flag, ours) in csi_conform::compat::migration_table() {
        let row = format!("| `{flag}` | {ours} |");
        assert!(readme.contains(&row), "docs/csi-sanity.md lacks the row {row}");
    }
    let rows = readme.lines().filter(|l| l.starts_with("| `-csi.") || l.starts_with("| `-ginkgo.") || l.starts_with("| `-version")).count();
    assert_eq!(rows, csi_conform::compat::migration_table().len(), "no row for a flag the code does not know");
}

#[test]
fn the_suite_authors_example_is_a_valid_suite() {
    let readme = page("docs/authoring.md");
    let start = readme.find("A complete suite:\n\n```yaml\n").expect("the suite example") + "A complete suite:\n\n```yaml\n".len();
    let text = &readme[start..start + readme[start..].find("```").unwrap()];
    let suite = csi_conform::suite::load_str("docs/authoring.md", text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(suite.scenarios().len(), 1);
}

#[test]
fn the_book_shows_the_current_spec_coverage() {
    let suites = csi_conform::suite::builtin();
    let rules = csi_conform::rules::covering().iter().map(|(rule, ids)| (rule.as_str(), ids.as_slice()));
    let pairs: Vec<(&str, &[String])> =
        suites.iter().flat_map(|s| s.scenarios()).map(|sc| (sc.id(), sc.spec())).chain(rules).collect();
    let opt_in: Vec<csi_conform::suite::Suite> =
        csi_conform::suite::OPT_IN.iter().map(|(name, _)| csi_conform::suite::opt_in_suite(name).unwrap().unwrap()).collect();
    let opt_in_pairs = opt_in.iter().flat_map(|s| s.scenarios().iter().map(move |sc| (s.id(), sc.spec())));
    let coverage = csi_conform::spec::coverage_with_opt_in(csi_conform::spec::builtin(), pairs, opt_in_pairs);
    let rendered = coverage.render(false);
    let readme = page("docs/checks.md");
    for wanted in ["testable requirements covered", "all   "] {
        let line = rendered.lines().find(|l| l.contains(wanted)).unwrap();
        assert!(readme.contains(line), "docs/checks.md should show `{line}` (csi-conform list --spec)");
    }
}

/// CONTRIBUTING.md's walkthrough is true: every code block that names a file (```` ```rust
/// path ````) is in that file verbatim, a block marked `whole` is that whole file, and the
/// check such a file declares is registered (`csi-conform list --checks` shows it).
#[test]
fn contributing_quotes_the_code_as_it_is() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let text = read("CONTRIBUTING.md");
    let (mut quoted, mut whole) = (0, 0);
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let block: String = lines.by_ref().take_while(|l| *l != "```").map(|l| format!("{l}\n")).collect();
        let words: Vec<&str> = info.split_whitespace().collect();
        let Some(path) = words.get(1) else { continue };
        let file = read(path);
        quoted += 1;
        if words.get(2) != Some(&"whole") {
            assert!(file.contains(&block), "CONTRIBUTING.md quotes {path}, which no longer has:\n{block}");
            continue;
        }
        assert!(block == file, "CONTRIBUTING.md shows the whole of {path}, which is now otherwise");
        whole += 1;
        for name in file.lines().filter_map(|l| l.trim().strip_prefix("const NAME: &'static str = \"")) {
            let name = name.trim_end_matches("\";");
            assert!(csi_conform::suite::checks().any(|(n, _)| n == name), "{path} declares {name}, which is not registered");
        }
    }
    assert!(quoted >= 10 && whole == 1, "CONTRIBUTING.md quotes {quoted} blocks, {whole} whole");
}
