//! The book (docs/, an mdBook whose pages are docs/*.md) and README.md stay true: every
//! relative link reaches a file and every `#anchor` a heading of it (mdBook's ids), SUMMARY.md
//! lists exactly the book's pages, the generated reference pages (command line, response
//! rules, quirks) are what the code says today, and README.md fits on a page. The commands
//! the pages show are run by `book_examples`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Component, Path, PathBuf},
};

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// How to bring the generated pages up to date (named by every failure about them).
const REGENERATE: &str = "scripts/book --generate (that is: CSI_CONFORM_BLESS=1 cargo test --test it book::)";

/// Every Markdown file a reader reaches: README.md, CHANGELOG.md, the suites' own pages (the
/// book includes them) and every page of the book; paths relative to the root.
pub fn pages() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        ["README.md", "CHANGELOG.md", "suites/README.md", "suites/BUILTIN.md"].iter().map(PathBuf::from).collect();
    out.extend(book_pages());
    out
}

/// Every .md file under docs/ (SUMMARY.md included), relative to the root, sorted.
fn book_pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path.strip_prefix(root()).expect("under the root").to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a Markdown text outside fenced code blocks, numbered from 1.
pub fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = marker {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => fence = Some((c, run)),
                    Some((open, len)) if open == c && run >= len && trimmed[run..].trim().is_empty() => fence = None,
                    Some(_) => {}
                }
                continue;
            }
        }
        if fence.is_none() {
            out.push((i + 1, line));
        }
    }
    out
}

/// `line` with its inline code spans removed (`keep`: their text kept, backticks dropped).
fn without_code(line: &str, keep: bool) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + run..];
        let closing = "`".repeat(run);
        match after.find(&closing) {
            Some(end) => {
                if keep {
                    out.push_str(&after[..end]);
                }
                rest = &after[end + run..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// mdBook's id of a heading's text: markup gone, lowercase, whitespace to `-`, everything but
/// letters, digits, `_` and `-` dropped.
pub fn heading_id(text: &str) -> String {
    let mut plain = without_code(text, true);
    // A link in a heading reads as its text.
    while let (Some(open), Some(mid)) = (plain.find('['), plain.find("](")) {
        let Some(close) = plain[mid..].find(')').map(|c| mid + c) else { break };
        if open > mid {
            break;
        }
        plain = format!("{}{}{}", &plain[..open], &plain[open + 1..mid], &plain[close + 1..]);
    }
    plain
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// `{{#include PATH}}` directives of a page: the path as written, with its line.
fn includes(text: &str) -> Vec<(usize, String)> {
    prose_lines(text)
        .into_iter()
        .filter_map(|(n, line)| {
            let inner = line.trim().strip_prefix("{{#include ")?.strip_suffix("}}")?;
            Some((n, inner.trim().to_owned()))
        })
        .collect()
}

/// The text a page renders as: its includes replaced by the files they name.
fn expanded(page: &Path) -> String {
    let text = read(page);
    let dir = page.parent().unwrap_or(Path::new(""));
    text.lines()
        .map(|line| match line.trim().strip_prefix("{{#include ").and_then(|l| l.strip_suffix("}}")) {
            Some(path) => read(&normal(&dir.join(path.trim()))),
            None => format!("{line}\n"),
        })
        .collect()
}

/// The ids of a page's headings, as mdBook makes them (a repeated one gets `-1`, `-2`...).
pub fn anchors(page: &Path) -> BTreeSet<String> {
    let text = expanded(page);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(&text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let id = heading_id(line[hashes..].trim().trim_end_matches('#').trim());
        let count = seen.entry(id.clone()).or_insert(0);
        out.insert(if *count == 0 { id.clone() } else { format!("{id}-{count}") });
        *count += 1;
    }
    out
}

/// A path with `.` and `..` resolved, without touching the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every link target of a Markdown text (inline links and images, reference definitions),
/// outside code, with its line.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code(line, false);
        if let Some(target) = line
            .trim_start()
            .strip_prefix('[')
            .and_then(|l| l.split_once("]:"))
            .and_then(|(_, def)| def.split_whitespace().next())
        {
            out.push((n, target.to_owned()));
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let mut depth = 0usize;
            let end = after
                .char_indices()
                .find(|(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map(|(i, _)| i)
                .unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
            out.push((n, target.to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// What is wrong with the links of `page` (relative to the root), read as `text` from the
/// directory `dir`: targets that do not exist, anchors no heading makes, and (for a page of
/// the book) targets outside docs/, which the built book would not have.
fn broken_links(page: &Path, text: &str, dir: &Path, in_book: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (n, target) in links(text) {
        let at = format!("{}:{n}: {target}", page.display());
        if target.is_empty() {
            out.push(format!("{at}: an empty link"));
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() { page.to_path_buf() } else { normal(&dir.join(path)) };
        if !root().join(&file).exists() {
            out.push(format!("{at}: {} does not exist", file.display()));
            continue;
        }
        if in_book && !file.starts_with("docs") {
            out.push(format!("{at}: {} is outside docs/, so the built book has no such page", file.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            if file.extension().is_none_or(|e| e != "md") {
                out.push(format!("{at}: an anchor into a file that is not Markdown"));
            } else if !anchors(&file).contains(anchor) {
                out.push(format!("{at}: {} has no heading whose id is `{anchor}`", file.display()));
            }
        }
    }
    out
}

#[test]
fn every_link_of_the_book_and_the_readme_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
        let in_book = page.starts_with("docs");
        let text = read(&page);
        checked += links(&text).len();
        broken.extend(broken_links(&page, &text, &dir, in_book));
        for (n, include) in includes(&text) {
            let included = normal(&dir.join(&include));
            if !root().join(&included).is_file() {
                broken.push(format!("{}:{n}: {{{{#include {include}}}}}: no such file", page.display()));
                continue;
            }
            // Included text is rendered as part of this page: its links must hold from here.
            broken.extend(broken_links(&included, &read(&included), &dir, in_book));
        }
    }
    assert!(checked > 100, "only {checked} links found: the scan is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn summary_lists_every_page_of_the_book_and_nothing_else() {
    let summary = read(Path::new("docs/SUMMARY.md"));
    let listed: Vec<PathBuf> =
        links(&summary).into_iter().map(|(_, target)| normal(&Path::new("docs").join(target))).collect();
    let missing: Vec<_> = listed.iter().filter(|p| !root().join(p).is_file()).collect();
    assert!(missing.is_empty(), "SUMMARY.md lists pages that do not exist: {missing:?}");
    let listed: BTreeSet<PathBuf> = listed.into_iter().collect();
    let unlisted: Vec<_> = book_pages()
        .into_iter()
        .filter(|p| p != Path::new("docs/SUMMARY.md") && !listed.contains(p))
        .collect();
    assert!(unlisted.is_empty(), "pages of docs/ that SUMMARY.md does not list (the book would not show them): {unlisted:?}");
    assert!(listed.len() >= 20, "SUMMARY.md lists {} pages", listed.len());
}

#[test]
fn the_readme_fits_on_a_page() {
    let size = read(Path::new("README.md")).len();
    assert!(size <= 10 * 1024, "README.md is {size} bytes; the rest belongs in the book (docs/)");
}

#[test]
fn heading_ids_follow_mdbook() {
    assert_eq!(heading_id("Pinned releases (`--orchestrator nomad@1.5`)"), "pinned-releases---orchestrator-nomad15");
    assert_eq!(heading_id("CSI v1.12 and v1.13"), "csi-v112-and-v113");
    assert_eq!(heading_id("Will it work under my orchestrator?"), "will-it-work-under-my-orchestrator");
    assert_eq!(heading_id("See [the guide](guide.md) now"), "see-the-guide-now");
}

#[test]
fn a_broken_link_or_anchor_is_found() {
    // The checker itself, on a page of the book as it would be with one slip each.
    let page = Path::new("docs/guide.md");
    let text = "[ok](ci.md#github-action) [gone](no-such-page.md) [bad anchor](ci.md#no-such-heading)\n\
                [outside](../README.md) `[in code](nowhere.md)`\n```\n[in a block](nowhere.md)\n```\n";
    let found = broken_links(page, text, Path::new("docs"), true);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains("no-such-page.md does not exist"), "{found:#?}");
    assert!(found[1].contains("no heading whose id is `no-such-heading`"), "{found:#?}");
    assert!(found[2].contains("outside docs/"), "{found:#?}");
}

/// The generated pages: where each lives and what the code makes of it today.
fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("docs/reference/cli.md", cli_page()),
        ("docs/reference/rules.md", rules_page()),
        ("docs/reference/quirks.md", quirks_page()),
    ]
}

fn banner(title: &str, source: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated from {source} by tests/it/book.rs; do not edit: run {REGENERATE}. -->\n\n"
    )
}

/// Every command's `--help`, as `csi-conform ... --help` prints it (100 columns).
fn cli_page() -> String {
    use clap::CommandFactory;
    fn add(cmd: &clap::Command, path: &str, out: &mut String) {
        let mut cmd = cmd.clone();
        out.push_str(&format!("## `{path}`\n\n```text\n{}\n```\n\n", cmd.render_long_help().to_string().trim_end()));
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            add(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut cmd = csi_conform::cli::Cli::command().term_width(100).max_term_width(100);
    cmd.build();
    let mut out = banner("Command line", "`csi-conform --help` and every subcommand's `--help`");
    out.push_str(
        "Every command and flag, as `--help` prints them. Without a subcommand, flags mean `run`, and\n\
         csi-sanity's flags are translated ([Replacing csi-sanity](../csi-sanity.md)).\n\n",
    );
    add(&cmd, "csi-conform", &mut out);
    out.trim_end().to_owned() + "\n"
}

/// `text` as one cell of a Markdown table (no `|`, no line break, no raw HTML).
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ").replace('<', "&lt;").replace('>', "&gt;")
}

/// The response rules' table (`csi_conform::rules::RULES`).
fn rules_page() -> String {
    let spec = csi_conform::spec::builtin();
    let mut out = banner("Response rules", "`csi_conform::rules::RULES` (crates/csi-spec/src/rules/table.rs)");
    out.push_str(
        "Every answer a run gets (scenario steps, named checks, property cases, the fingerprint,\n\
         teardown, `cleanup`) is checked against these rules, whatever the scenario expects of the\n\
         call ([Every answer checked](../checks.md#every-answer-checked-response-rules)). A broken\n\
         MUST fails the step that made the call; a tolerated deviation warns; a note is no verdict.\n\
         The last column names the reference plugin's quirk that breaks the rule on purpose.\n\n\
         | rule | level | requirement | what it asks | quirk |\n|---|---|---|---|---|\n",
    );
    for rule in csi_conform::rules::RULES {
        let requirement = match spec.get(rule.requirement) {
            Some(req) => format!("[`{}`]({})", rule.requirement, req.link()),
            None => format!("`{}`", rule.requirement),
        };
        let quirks: Vec<String> = csi_conform::reference::Quirk::ALL
            .iter()
            .filter(|q| q.answer_rule() == Some(rule.id))
            .map(|q| format!("`{}`", q.name()))
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            rule.id,
            rule.level.as_str(),
            requirement,
            cell(rule.summary),
            quirks.join(", ")
        ));
    }
    out
}

/// The reference plugin's quirks (`reference-plugin --list-quirks`).
fn quirks_page() -> String {
    let mut out = banner("Quirks of the reference plugin", "`csi-conform reference-plugin --list-quirks`");
    out.push_str(
        "`csi-conform reference-plugin --quirk NAME` (repeatable) misbehaves as these real plugins\n\
         do ([The reference plugin](../reference-plugin.md#quirks-misbehaving-on-purpose)).\n\n\
         | quirk | what it does | the rule it breaks |\n|---|---|---|\n",
    );
    for quirk in csi_conform::reference::Quirk::ALL {
        let rule = quirk.answer_rule().map(|r| format!("[`{r}`](rules.md)")).unwrap_or_default();
        out.push_str(&format!("| `{}` | {} | {} |\n", quirk.name(), cell(quirk.description()), rule));
    }
    out
}

#[test]
fn the_generated_reference_pages_are_current() {
    let bless = std::env::var_os("CSI_CONFORM_BLESS").is_some();
    let mut stale = Vec::new();
    for (path, text) in generated() {
        let file = root().join(path);
        if bless {
            std::fs::create_dir_all(file.parent().expect("a directory")).expect("make docs/reference");
            std::fs::write(&file, &text).unwrap_or_else(|e| panic!("{path}: {e}"));
        } else if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
            stale.push(path);
        }
    }
    assert!(stale.is_empty(), "generated pages that no longer match the code: {stale:?}; regenerate them with {REGENERATE}");
}

#[test]
fn the_cli_page_shows_every_subcommand() {
    let page = cli_page();
    for sub in ["run", "fingerprint", "list", "suites check", "call", "report", "cleanup", "reference-plugin"] {
        assert!(page.contains(&format!("## `csi-conform {sub}`")), "no section for `csi-conform {sub}`");
    }
    assert!(page.contains("--test-volume-size"), "run's flags are on the page");
}


/// Pages that name files of other projects (real-plugins.md: cfgd-csi's `src/app.rs`).
const RECORDS: &[&str] = &["docs/real-plugins.md"];

/// The repository paths a text names (`src/...`, `crates/...`, `tests/...`, `scripts/...`,
/// `suites/...`, `docs/...`, `proto/...`), each cut before a placeholder (`<name>`, `{a,b}`).
fn repository_paths(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for prefix in ["src/", "crates/", "tests/", "scripts/", "suites/", "docs/", "proto/"] {
        for (at, _) in text.match_indices(prefix) {
            let before = if at == 0 { b' ' } else { bytes[at - 1] };
            if before.is_ascii_alphanumeric() || b"/.-:_".contains(&before) {
                continue;
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                .collect();
            let path = path.trim_end_matches(['.', ',']);
            out.push(path.to_owned());
        }
    }
    out
}

#[test]
fn every_repository_path_the_book_names_exists() {
    let mut missing = Vec::new();
    let mut named = 0;
    for page in pages() {
        if RECORDS.iter().any(|r| page == Path::new(r)) {
            continue;
        }
        for path in repository_paths(&read(&page)) {
            named += 1;
            if root().join(&path).exists() {
                continue;
            }
            // After a move into the workspace's crates, say where the file went.
            let moved: Vec<String> = std::fs::read_dir(root().join("crates"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|c| format!("crates/{}/{path}", c.file_name().to_string_lossy()))
                .filter(|p| root().join(p).exists())
                .collect();
            missing.push(format!("{}: {path}{}", page.display(), if moved.is_empty() { String::new() } else { format!(" (now {})", moved.join(" or ")) }));
        }
    }
    assert!(named > 50, "only {named} paths found: the scan is broken");
    assert!(missing.is_empty(), "paths the pages name that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_readme_opens_with_the_two_set_up_commands() {
    // What a newcomer runs on a fresh machine: the main job, and the tests exactly as CI runs
    // them (.ci/run calls scripts/test).
    let readme = read(Path::new("README.md"));
    let setup = readme.find("## Set up on a fresh machine").expect("the set-up section");
    for command in ["```sh\ncargo run --release -- run\n```", "```sh\nscripts/test\n```"] {
        let at = readme.find(command).unwrap_or_else(|| panic!("README.md lacks {command:?}"));
        assert!(at > setup && at < 2_500, "{command:?} is not early in the set-up section (byte {at})");
    }
    let ci = read(Path::new(".ci/run"));
    assert!(ci.lines().any(|l| l.trim() == "exec scripts/test"), ".ci/run no longer runs exactly scripts/test");
}
