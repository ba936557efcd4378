//! Guards the order left inside the engine crate (a unit test only; the compiler keeps the
//! crates in order): the engine's modules import only from a lower row of [`ENGINE`]; every
//! file of `src/suite/` sits on a layer of [`LAYERS`] (the table in the module doc of
//! `suite`), and its `super::` and `crate::suite::` imports outside `#[cfg(test)]` point to
//! the same or a lower layer, through the module that defines a name (not through a
//! re-export of `suite`'s own `mod.rs`); no file but the context's (and its folder's) has
//! `impl ScenarioCtx`; no `.rs` file of the workspace grows past [`MAX_LINES`].

use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_LINES: usize = 1_000;

/// The engine's modules (a file or folder of `src/`), lowest first: a module imports only
/// from a lower row, never from its own row or above.
const ENGINE: &[&[&str]] =
    &[&["orchestrator"], &["suite"], &["config", "parity", "journal"], &["cleanup"], &["session"]];

/// Each file of `src/suite/` (a path relative to it; a folder ending in `/` covers what is
/// in it) and its layer, lowest first. A file imports only from its own layer or below.
const LAYERS: &[(&str, u8, &str)] = &[
    ("vars.rs", 1, "values"),
    ("error.rs", 1, "values"),
    ("pool.rs", 1, "values"),
    ("existing.rs", 1, "values"),
    ("bounds.rs", 1, "values"),
    ("sanity.rs", 1, "values"),
    ("inspect.rs", 1, "values"),
    ("inspect/", 1, "values"),
    ("resources.rs", 1, "values"),
    ("request.rs", 1, "values"),
    ("deleted.rs", 1, "values"),
    ("answer.rs", 1, "values"),
    ("catalog.rs", 2, "vocabulary"),
    ("model.rs", 3, "model"),
    ("assert.rs", 3, "model"),
    ("profile.rs", 3, "model"),
    ("settings.rs", 4, "settings and scheduler"),
    ("paths.rs", 4, "settings and scheduler"),
    ("builtin_vars.rs", 4, "settings and scheduler"),
    ("budget.rs", 4, "settings and scheduler"),
    ("budget/", 4, "settings and scheduler"),
    ("verifier.rs", 4, "settings and scheduler"),
    ("patience.rs", 4, "settings and scheduler"),
    ("inflight.rs", 4, "settings and scheduler"),
    ("witness.rs", 4, "settings and scheduler"),
    ("load.rs", 5, "loading"),
    ("load/", 5, "loading"),
    ("ctx.rs", 6, "context"),
    ("ctx/", 6, "context"),
    ("mounted.rs", 6, "context"),
    ("checks/", 7, "checks"),
    ("builtin.rs", 7, "checks"),
    ("property.rs", 8, "engine"),
    ("steps.rs", 8, "engine"),
    ("probe.rs", 8, "engine"),
    ("run.rs", 8, "engine"),
    ("instances.rs", 8, "engine"),
];

/// Files outside the layers: the module's face (it re-exports every layer) and the tests.
const UNLAYERED: &[&str] = &["mod.rs", "golden.rs"];

/// The files with `impl ScenarioCtx`: the context's module and its folder.
const CONTEXT: &[&str] = &["src/suite/ctx.rs", "src/suite/ctx/"];

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

/// The code of a Rust file without its `//` comments (doc comments may name modules freely)
/// and without the items marked `#[cfg(test)]` (tests may reach anywhere).
fn code(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i]));
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push(line);
            continue;
        }
        // Skip the item: one line ending in `;`, or up to its closing brace.
        let mut depth = 0i32;
        for item in lines.by_ref() {
            depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
            if depth <= 0 && (item.trim_end().ends_with(';') || item.trim_end().ends_with('}')) {
                break;
            }
        }
    }
    out.join("\n")
}

/// The module path (under `suite`) of a file relative to `src/suite/`: `checks/list.rs` is
/// `["checks", "list"]`, `checks/mod.rs` is `["checks"]`, `mod.rs` is `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every module path (under `suite`) that an import in `code` of module `from` names: the
/// `super::`/`crate::suite::` path up to its first segment that is not a module of `modules`
/// (so `super::checks::CheckDef` names `checks`, `use super::{a, b::C}` names `a` and `b`).
fn imports(code: &str, from: &[String], modules: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let starts = code.match_indices("super::").map(|(i, _)| i).chain(code.match_indices("crate::suite::").map(|(i, _)| i));
    for start in starts {
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_' || bytes[start - 1] == b':') {
            continue;
        }
        let (base, rest) = if code[start..].starts_with("crate::suite::") {
            (Vec::new(), &code[start + "crate::suite::".len()..])
        } else {
            let mut base = from.to_vec();
            let mut rest = &code[start..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            (base, rest)
        };
        walk(base, rest, modules, &mut found);
    }
    let mut seen = Vec::new();
    found.retain(|m| if seen.contains(m) { false } else { seen.push(m.clone()); true });
    found
}

/// Follows one path (`a::b::C`, `a::{b, c::D}`) from module `base` while its segments are
/// modules, and records where each branch stops.
fn walk(mut base: Vec<String>, mut rest: &str, modules: &[Vec<String>], found: &mut Vec<Vec<String>>) {
    loop {
        let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let mut next = base.clone();
        next.push(ident.clone());
        if ident.is_empty() || !modules.contains(&next) {
            break;
        }
        base = next;
        rest = &rest[ident.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    let Some(group) = rest.strip_prefix('{') else {
        found.push(base);
        return;
    };
    // The group's items, split at its top-level commas.
    let mut depth = 0;
    let mut item_start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                walk_item(&base, &group[item_start..i], modules, found);
                return;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                walk_item(&base, &group[item_start..i], modules, found);
                item_start = i + 1;
            }
            _ => {}
        }
    }
}

fn walk_item(base: &[String], item: &str, modules: &[Vec<String>], found: &mut Vec<Vec<String>>) {
    let item = item.trim();
    if !item.is_empty() {
        walk(base.to_vec(), item, modules, found);
    }
}

/// The layer of a file relative to `src/suite/`.
fn layer_of(rel: &str) -> Option<(u8, &'static str)> {
    LAYERS
        .iter()
        .find(|(path, _, _)| if path.ends_with('/') { rel.starts_with(path) } else { rel == *path })
        .map(|&(_, layer, name)| (layer, name))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of `src/suite/`, relative to it, with its text.
fn suite_files() -> Vec<(String, String)> {
    let dir = root().join("src/suite");
    let mut files = Vec::new();
    rs_files(&dir, &mut files);
    files
        .iter()
        .map(|p| (p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(p).unwrap()))
        .collect()
}

/// The imports of `files` that point up the layers (or through `suite`'s `mod.rs`), as
/// `file -> module (why)`.
fn upward_imports(files: &[(String, String)]) -> Vec<String> {
    let modules: Vec<Vec<String>> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let file_of = |module: &[String]| files.iter().map(|(rel, _)| rel).find(|rel| module_of(rel) == module);
    let mut offenders = Vec::new();
    for (rel, text) in files.iter().filter(|(rel, _)| !UNLAYERED.contains(&rel.as_str())) {
        let (layer, _) = layer_of(rel).unwrap_or_else(|| panic!("src/suite/{rel} has no layer in LAYERS"));
        for target in imports(&code(text), &module_of(rel), &modules) {
            let target_file = file_of(&target).map_or("mod.rs", |s| s.as_str());
            if target_file == "mod.rs" {
                offenders.push(format!("{rel} -> suite (import from the module that defines the name)"));
                continue;
            }
            let (to, name) = layer_of(target_file).unwrap_or_else(|| panic!("src/suite/{target_file} has no layer"));
            if to > layer {
                offenders.push(format!("{rel} (layer {layer}) -> {target_file} (layer {to}, {name})"));
            }
        }
    }
    offenders
}

#[test]
fn the_detector_sees_imports_in_paths_and_groups_outside_tests() {
    let modules: Vec<Vec<String>> =
        ["model", "run", "checks", "checks/data", "ctx"].iter().map(|m| module_of(&format!("{m}.rs"))).collect();
    let from = module_of("steps.rs");
    let names = |text: &str| imports(&code(text), &from, &modules);
    assert_eq!(names("use super::{\n    model::*,\n    run::{ScenarioCtx, call_finding},\n};"), [["model"], ["run"]]);
    assert_eq!(names("let fp = crate::suite::run::tests_support::fingerprint(1);"), [["run"]]);
    assert_eq!(names("use super::{checks::data::publications, ctx};"), [vec!["checks", "data"], vec!["ctx"]]);
    assert_eq!(names("let s: super::Suite = todo!();"), [Vec::<String>::new()]);
    assert!(names("let flow = ctx.run_steps(&steps); // see super::run::run_until").is_empty());
    assert!(names("#[cfg(test)]\nmod tests {\n    use super::run::*;\n}\n").is_empty());
    assert!(names("#[cfg(test)]\nuse super::run;\n").is_empty());
    let nested = imports("use super::*;", &module_of("checks/lifecycle/node.rs"), &modules);
    assert_eq!(nested, [module_of("checks/lifecycle.rs")]);
}

#[test]
fn every_suite_file_has_a_layer() {
    let files = suite_files();
    assert!(files.len() > 20, "found only {files:?}");
    let missing: Vec<&String> =
        files.iter().map(|(rel, _)| rel).filter(|rel| !UNLAYERED.contains(&rel.as_str()) && layer_of(rel).is_none()).collect();
    assert!(missing.is_empty(), "add these to LAYERS in the engine's src/layout.rs: {missing:?}");
}

#[test]
fn suite_imports_point_to_the_same_or_a_lower_layer() {
    let offenders = upward_imports(&suite_files());
    assert!(offenders.is_empty(), "imports up the layers of the engine's src/layout.rs:\n{}", offenders.join("\n"));
}

#[test]
fn an_upward_import_is_caught() {
    let mut files = suite_files();
    let (_, text) = files.iter_mut().find(|(rel, _)| rel == "model.rs").unwrap();
    text.insert_str(0, "use super::run::run_until;\n");
    assert_eq!(upward_imports(&files), ["model.rs (layer 3) -> run.rs (layer 8, engine)"]);
}

#[test]
fn only_the_context_implements_scenario_ctx() {
    let root = root();
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    let offenders: Vec<_> = files
        .iter()
        .filter(|p| {
            let rel = p.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            !CONTEXT.iter().any(|c| if c.ends_with('/') { rel.starts_with(c) } else { rel == *c }) && rel != "src/layout.rs"
        })
        .filter(|p| {
            let code = code(&std::fs::read_to_string(p).unwrap());
            code.match_indices("impl").any(|(i, _)| {
                let rest = code[i + 4..].trim_start();
                let rest = if rest.starts_with('<') { rest.split_once('>').map_or(rest, |(_, r)| r).trim_start() } else { rest };
                rest.starts_with("ScenarioCtx") && !rest["ScenarioCtx".len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            })
        })
        .collect();
    assert!(offenders.is_empty(), "only {CONTEXT:?} may have `impl ScenarioCtx` (use free functions): {offenders:?}");
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    // Every crate of the workspace: this crate is at `crates/<name>`.
    let root = root().join("../..").canonicalize().unwrap();
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    rs_files(&root.join("crates"), &mut files);
    assert!(files.iter().any(|p| p.ends_with("crates/csi-proto/src/proto.rs")), "the workspace was not found at {}", root.display());
    let long: Vec<_> = files
        .iter()
        .map(|p| (p.strip_prefix(&root).unwrap().to_string_lossy().into_owned(), p))
        .map(|(rel, p)| (rel, std::fs::read_to_string(p).unwrap().lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines, split them: {long:?}");
}

/// The row of an engine module in [`ENGINE`].
fn engine_row(module: &str) -> Option<usize> {
    ENGINE.iter().position(|row| row.contains(&module))
}

/// Every file of the engine's `src/` but the crate root, this test and the files of tests
/// (`*_tests.rs`), relative to it, with its text.
fn engine_files() -> Vec<(String, String)> {
    let dir = root().join("src");
    let mut files = Vec::new();
    rs_files(&dir, &mut files);
    files
        .iter()
        .map(|p| (p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned(), p))
        .filter(|(rel, _)| rel != "lib.rs" && rel != "layout.rs" && !rel.ends_with("_tests.rs"))
        .map(|(rel, p)| (rel, std::fs::read_to_string(p).unwrap()))
        .collect()
}

/// The imports of `files` (outside `#[cfg(test)]`) that name an engine module on the
/// importer's own row or above, as `file (module) -> module`.
fn engine_upward_imports(files: &[(String, String)]) -> Vec<String> {
    let modules: Vec<Vec<String>> = ENGINE.iter().flat_map(|row| row.iter()).map(|m| vec![(*m).to_owned()]).collect();
    let mut offenders = Vec::new();
    for (rel, text) in files {
        let module = rel.split('/').next().unwrap_or_default().trim_end_matches(".rs");
        let row = engine_row(module).unwrap_or_else(|| panic!("src/{rel}: module {module} has no row in ENGINE"));
        let code = code(text);
        let bytes = code.as_bytes();
        let mut found = Vec::new();
        for (start, _) in code.match_indices("crate::") {
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_' || bytes[start - 1] == b':') {
                continue;
            }
            walk(Vec::new(), &code[start + "crate::".len()..], &modules, &mut found);
        }
        for target in found.iter().filter_map(|m| m.first()).filter(|m| m.as_str() != module) {
            if engine_row(target).is_some_and(|to| to >= row) {
                let line = format!("{rel} ({module}) -> {target}");
                if !offenders.contains(&line) {
                    offenders.push(line);
                }
            }
        }
    }
    offenders
}

#[test]
fn every_engine_module_has_a_row() {
    let files = engine_files();
    assert!(files.iter().any(|(rel, _)| rel == "suite/run.rs"), "found only {:?}", files.iter().map(|(r, _)| r).collect::<Vec<_>>());
    let missing: Vec<&String> = files
        .iter()
        .map(|(rel, _)| rel)
        .filter(|rel| engine_row(rel.split('/').next().unwrap_or_default().trim_end_matches(".rs")).is_none())
        .collect();
    assert!(missing.is_empty(), "add their modules to ENGINE in the engine's src/layout.rs: {missing:?}");
}

#[test]
fn engine_modules_import_only_from_a_lower_row() {
    let offenders = engine_upward_imports(&engine_files());
    assert!(offenders.is_empty(), "imports up the rows of ENGINE in the engine's src/layout.rs:\n{}", offenders.join("\n"));
}

#[test]
fn an_engine_import_up_or_across_a_row_is_caught() {
    let mut files = engine_files();
    let (_, text) = files.iter_mut().find(|(rel, _)| rel == "suite/model.rs").unwrap();
    text.insert_str(0, "use crate::{config::BoundsOverride, proto};\n");
    let (_, text) = files.iter_mut().find(|(rel, _)| rel == "journal.rs").unwrap();
    text.insert_str(0, "fn f() { crate::parity::spec_text(1); }\n");
    assert_eq!(engine_upward_imports(&files), ["journal.rs (journal) -> parity", "suite/model.rs (suite) -> config"]);
}
