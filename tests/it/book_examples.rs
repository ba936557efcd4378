//! Every command the book and README.md show in a ```` ```console ```` block runs, as written,
//! against the bundled reference plugin: `/tmp/` is a fresh directory (also the working
//! directory), a command ending in `&` runs in the background until the block ends (a
//! reference plugin is waited for until it says it listens), `# exits N` after a command says
//! its exit code (0 otherwise), and the output lines a block shows after a command (but `...`)
//! are lines it printed. Commands in ```` ```console,ignore ```` blocks need a plugin or a
//! machine of the reader's own: csi-conform must accept their flags.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use crate::{
    book::{pages, root},
    support::{bin, can_mount},
};

/// One `$ ...` command of a console block.
#[derive(Debug, Clone)]
struct Shown {
    /// `page:line`.
    at: String,
    /// The command as written (continuation lines joined, a here-document kept).
    text: String,
    /// The output lines shown after it.
    output: Vec<String>,
}

#[derive(Debug)]
struct Block {
    at: String,
    runnable: bool,
    commands: Vec<Shown>,
}

/// The console blocks of a page.
fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(root().join(page)).expect("a page");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let info = lines[i].trim_start().strip_prefix("```").map(str::trim);
        let Some(info) = info else {
            i += 1;
            continue;
        };
        let runnable = match info {
            "console" => true,
            "console,ignore" => false,
            _ => {
                // Skip to the end of this fence.
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
                i += 1;
                continue;
            }
        };
        let mut block = Block { at: format!("{}:{}", page.display(), i + 1), runnable, commands: Vec::new() };
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            let line = lines[i];
            if let Some(command) = line.strip_prefix("$ ") {
                let at = format!("{}:{}", page.display(), i + 1);
                let mut text = command.to_owned();
                while text.ends_with('\\') && i + 1 < lines.len() {
                    text.pop();
                    i += 1;
                    text.push(' ');
                    text.push_str(lines[i].trim());
                }
                if let Some(delimiter) = heredoc(&text) {
                    while i + 1 < lines.len() {
                        i += 1;
                        text.push('\n');
                        text.push_str(lines[i]);
                        if lines[i] == delimiter {
                            break;
                        }
                    }
                }
                block.commands.push(Shown { at, text, output: Vec::new() });
            } else if !line.starts_with('#')
                && !line.trim().is_empty()
                && line.trim() != "..."
                && let Some(last) = block.commands.last_mut()
            {
                last.output.push(line.trim().to_owned());
            }
            i += 1;
        }
        i += 1;
        out.push(block);
    }
    out
}

/// The delimiter of a here-document the command opens (`<<'EOF'`, `<<EOF`).
fn heredoc(text: &str) -> Option<String> {
    let after = text.split_once("<<")?.1.trim_start();
    let word: String = after.trim_start_matches(['\'', '"']).chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!word.is_empty()).then_some(word)
}

/// A shell line split into words (quotes, backslashes), and the comment after `#`.
fn split(line: &str) -> (Vec<String>, String) {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$')) => w.push(chars.next().expect("peeked")),
                        q => w.push(q),
                    }
                }
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    word.get_or_insert_with(String::new).push(next);
                }
            }
            '#' if word.is_none() => return (words, chars.collect::<String>().trim().to_owned()),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    (words, String::new())
}

/// The exit code a command's comment promises (`# exits 1`), else 0.
fn expected_code(comment: &str) -> i32 {
    comment
        .split_once("exits ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or(0)
}

fn all_blocks() -> Vec<Block> {
    pages().iter().filter(|p| p.extension().is_some_and(|e| e == "md")).flat_map(|p| blocks(p)).collect()
}

/// Whether csi-conform's command line (csi-sanity's flags translated first) accepts `words`.
fn parses(words: &[String]) -> Result<(), String> {
    use clap::Parser;
    let translated = csi_conform::compat::translate(words);
    csi_conform::cli::Cli::try_parse_from(&translated.args).map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn every_shown_command_parses() {
    let mut bad = Vec::new();
    let mut count = 0;
    for block in all_blocks() {
        for shown in &block.commands {
            let (mut words, _) = split(&shown.text);
            match words.first().map(String::as_str) {
                Some("csi-conform") => {}
                // The reference plugin's own binary takes exactly `reference-plugin`'s flags.
                Some("csi-reference-plugin") => {
                    words.splice(0..1, ["csi-conform".to_owned(), "reference-plugin".to_owned()]);
                }
                _ => continue,
            }
            count += 1;
            let words: Vec<String> = words.into_iter().filter(|w| w != "&").collect();
            if let Err(e) = parses(&words) {
                bad.push(format!("{}: {}\n{e}", shown.at, shown.text));
            }
        }
    }
    assert!(count >= 40, "only {count} csi-conform commands found in console blocks");
    assert!(bad.is_empty(), "commands the pages show that csi-conform refuses:\n{}", bad.join("\n"));
}

/// Runs one runnable block in a fresh directory; returns what went wrong.
fn run_block(block: &Block) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tmp = format!("{}/", dir.path().display());
    // Files a page shows as ```yaml blocks opening with `# NAME.yaml` are there too.
    let page = block.at.split(':').next().expect("page");
    let text = std::fs::read_to_string(root().join(page)).expect("the page");
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```yaml" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            if let Some(name) = body.first().and_then(|l| l.strip_prefix("# ")).filter(|n| n.ends_with(".yaml") && !n.contains(' ')) {
                let file = dir.path().join(name);
                std::fs::create_dir_all(file.parent().expect("a directory")).expect("make the shown file's directory");
                std::fs::write(&file, body.join("\n").replace("/tmp/", &tmp)).expect("write the shown file");
            }
        }
    }
    let mut problems = Vec::new();
    let mut background: Vec<Child> = Vec::new();
    for shown in &block.commands {
        let text = shown.text.replace("/tmp/", &tmp);
        let (words, comment) = split(text.lines().next().unwrap_or(""));
        let expected = expected_code(&comment);
        let is_ours = words.first().map(String::as_str) == Some("csi-conform");
        let in_background = words.last().map(String::as_str) == Some("&");
        let mut command = if is_ours {
            let mut c = Command::new(bin());
            c.args(words[1..].iter().filter(|w| *w != "&"));
            c
        } else {
            let mut c = Command::new("sh");
            c.arg("-c").arg(&text);
            c
        };
        command.current_dir(dir.path());
        for var in ["CI", "NO_COLOR", "RUST_LOG", "CSI_ENDPOINT", "GITHUB_ACTIONS", "COLUMNS"] {
            command.env_remove(var);
        }
        if in_background {
            command.stdout(Stdio::piped()).stderr(Stdio::null());
            let mut child = command.spawn().expect("start a background command");
            let stdout = child.stdout.take().expect("piped");
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if line.contains("listening") {
                        let _ = tx.send(());
                    }
                }
            });
            background.push(child);
            if rx.recv_timeout(Duration::from_secs(120)).is_err() {
                problems.push(format!("{}: `{}` never said it was listening", shown.at, shown.text));
                break;
            }
            continue;
        }
        let out = command.output().expect("run a shown command");
        let printed = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let code = out.status.code().unwrap_or(-1);
        if code != expected {
            let tail: Vec<&str> = printed.lines().rev().take(25).collect::<Vec<_>>().into_iter().rev().collect();
            problems.push(format!("{}: `{}` exited {code}, the page says {expected}:\n{}", shown.at, shown.text, tail.join("\n")));
        }
        for line in &shown.output {
            if !printed.lines().any(|p| p.trim() == line) {
                problems.push(format!("{}: `{}` did not print the line the page shows: {line}", shown.at, shown.text));
            }
        }
    }
    for mut child in background {
        let _ = child.kill();
        let _ = child.wait();
    }
    problems
}

#[test]
fn every_runnable_command_runs_as_shown() {
    let test = "book_examples::every_runnable_command_runs_as_shown";
    let mut runnable: Vec<Block> = all_blocks().into_iter().filter(|b| b.runnable).collect();
    let commands: usize = runnable.iter().map(|b| b.commands.len()).sum();
    assert!(commands >= 25, "only {commands} runnable commands found: the scan is broken");
    if !csi_conform::mounts::has_cap_sys_admin() {
        runnable.retain(|b| !b.commands.iter().any(|c| c.text.contains("--private-mounts")));
        can_mount(test, "the --private-mounts examples move the reference plugin into a mount namespace");
    }
    let next = AtomicUsize::new(0);
    let problems = Mutex::new(Vec::new());
    // Three blocks at a time: each is a plugin and a run, on a machine the other tests share.
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while let Some(block) = runnable.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let found = run_block(block);
                    if !found.is_empty() {
                        problems.lock().expect("lock").push(format!("block at {}:\n  {}", block.at, found.join("\n  ")));
                    }
                }
            });
        }
    });
    let problems = problems.into_inner().expect("lock");
    assert!(problems.is_empty(), "commands of the book that do not run as shown:\n{}", problems.join("\n"));
}

#[test]
fn the_shell_splitter_reads_quotes_comments_and_exit_codes() {
    let (words, comment) = split(r#"csi-conform run --focus '^controller\.create$' --x "a b" c\ d # exits 1: caught"#);
    assert_eq!(words, ["csi-conform", "run", "--focus", r"^controller\.create$", "--x", "a b", "c d"]);
    assert_eq!(expected_code(&comment), 1);
    assert_eq!(expected_code("or nomad, kubernetes"), 0);
    assert_eq!(heredoc("cat > a.yaml <<'EOF'").as_deref(), Some("EOF"));
}
