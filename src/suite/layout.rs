//! Guards the engine's layout (a unit test only): data flows one way, so no module under
//! `src/suite/` but `mod.rs` (and this one) imports the runner (`run::`), the check context (`ctx.rs`,
//! `settings.rs`) knows nothing of step execution, and no `.rs` file under `src/` grows past
//! [`MAX_LINES`].

use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 1_000;

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a Rust file without its `//` comments (doc comments may name modules freely).
fn code(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// Whether `text` names a path through module `module` (`module::`, also inside a `use
/// super::{...}` group), comments aside.
fn names_module(text: &str, module: &str) -> bool {
    let needle = format!("{module}::");
    let code = code(text);
    code.match_indices(&needle)
        .any(|(i, _)| !code[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_detector_sees_runner_imports_and_nothing_else() {
    assert!(names_module("use super::{\n    model::*,\n    run::{ScenarioCtx, call_finding},\n};", "run"));
    assert!(names_module("let fp = crate::suite::run::tests_support::fingerprint(1);", "run"));
    assert!(!names_module("use super::{ctx::ScenarioCtx, settings::RunConfig};", "run"));
    assert!(!names_module("let flow = ctx.run_steps(&steps); // see run::run_until", "run"));
    assert!(!names_module("use super::dry_run::Plan;", "run"));
}

#[test]
fn no_suite_module_imports_the_runner() {
    let dir = root().join("src/suite");
    let mut files = Vec::new();
    rs_files(&dir, &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let offenders: Vec<_> = files
        .iter()
        .filter(|p| p.as_path() != dir.join("mod.rs") && p.as_path() != dir.join("layout.rs"))
        .filter(|p| names_module(&std::fs::read_to_string(p).unwrap(), "run"))
        .collect();
    assert!(offenders.is_empty(), "these import the runner (run.rs); use ctx/settings instead: {offenders:?}");
}

#[test]
fn the_check_context_does_not_know_step_execution() {
    for name in ["ctx.rs", "settings.rs"] {
        let text = std::fs::read_to_string(root().join("src/suite").join(name)).unwrap();
        assert!(!names_module(&text, "steps"), "src/suite/{name} imports steps");
        assert!(!names_module(&text, "run"), "src/suite/{name} imports run");
    }
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let root = root();
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    let long: Vec<_> = files
        .iter()
        .map(|p| (p.strip_prefix(&root).unwrap().to_string_lossy().into_owned(), p))
        .map(|(rel, p)| (rel, std::fs::read_to_string(p).unwrap().lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines, split them: {long:?}");
}
