//! `csi-conform bench` through the built binary: what a ramp measures and that it leaves
//! nothing on the plugin (read from the plugin, not from our bookkeeping), even when
//! interrupted; `report --compare` catching `slow-after-n` and not a clean plugin; the soak
//! catching `leak-fd-per-call` and not a clean plugin; the charts as well-formed SVG.
//! Thresholds are checked against effects, never against a clock.

use std::path::Path;

use csi_conform::bench::{BenchReport, compare};

use crate::support::process::{ReferenceProcess, signal, spawn_csi_conform, wait_for_journal};
use crate::support::csi_conform;

fn read(path: &Path) -> BenchReport {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    compare::from_json(&text).expect("a bench report").expect("that parses")
}

/// Nothing of the bench is left: the plugin lists no volume, the journal lists nothing, no
/// mount and no directory remain under the work dir.
async fn assert_nothing_left(plugin: &ReferenceProcess, dir: &Path) {
    assert_eq!(plugin.volume_ids().await, Vec::<String>::new(), "volumes left on the plugin");
    let outstanding = csi_conform::journal::outstanding(&dir.join("journal.jsonl")).unwrap();
    assert!(outstanding.is_empty(), "{outstanding:?}");
    assert!(csi_conform::mounts::mounts_under(&dir.join("work")).is_empty());
    let left: Vec<_> = std::fs::read_dir(dir.join("work")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_ramp_times_every_rpc_of_every_lifecycle_measures_the_plugin_process_and_leaves_nothing() {
    let plugin = ReferenceProcess::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = csi_conform(
        &["bench", "--endpoint", &plugin.endpoint(), "--max-concurrency", "2", "--lifecycles", "3", "--work-dir", "work",
          "--journal", "journal.jsonl", "--json", "b.json", "--html", "b.html"],
        dir.path(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report = read(&dir.path().join("b.json"));
    assert_eq!(report.levels.iter().map(|l| l.concurrency).collect::<Vec<_>>(), [1, 2], "{}", report.stopped);
    assert_eq!(report.lifecycle_rpcs.len(), 13, "the reference plugin serves every step: {:?}", report.lifecycle_rpcs);
    for level in &report.levels {
        assert_eq!(level.completed, 3 * level.concurrency as u64);
        for rpc in &report.lifecycle_rpcs {
            assert_eq!(level.rpcs[rpc].count, level.completed, "{rpc} once per lifecycle");
        }
        assert_eq!(level.error_count(), 0);
        let process = level.process.expect("the plugin's own process is measured");
        assert!(process.cpu_seconds > 0.0 && process.peak_rss_kib > 0 && process.fds > 0, "{process:?}");
    }
    let found = report.process.as_ref().expect("the plugin process is found");
    assert!(!found.shares_harness && found.how.contains("SO_PEERCRED agrees"), "{found:?}");
    let cmdline = std::fs::read_to_string(format!("/proc/{}/cmdline", found.pid)).unwrap();
    assert!(cmdline.contains("reference-plugin") && cmdline.contains(&plugin.endpoint()), "{cmdline}");
    assert_eq!(report.left_behind, 0);
    assert!(stdout.contains("nothing left behind") && stdout.contains("NodeStageVolume"), "{stdout}");
    assert_nothing_left(&plugin, dir.path()).await;

    // The HTML's charts: inline, well-formed SVG with a drawn line each.
    let html = std::fs::read_to_string(dir.path().join("b.html")).unwrap();
    let svgs = svg_documents(&html);
    assert_eq!(svgs.len(), 3, "p99, p50 and throughput charts");
    for svg in svgs {
        assert_well_formed(svg);
        assert!(svg.contains("<polyline") || svg.contains("<path"), "a line is drawn");
    }
    assert!(html.contains("throughput against concurrency") && html.contains("p99 latency per RPC"));

    // As a browser builds it: the three charts are in the DOM as SVG with their lines.
    let test = "a_ramp_times_every_rpc_of_every_lifecycle_measures_the_plugin_process_and_leaves_nothing (browser)";
    let Some(browser) = crate::html::chromium() else {
        crate::support::skip(test, crate::support::Precondition::Chromium, "none on PATH");
        return;
    };
    let url = format!("file://{}", dir.path().join("b.html").display());
    let dom = crate::html::headless(&browser, &["--dump-dom"], &url).await;
    let dom = String::from_utf8_lossy(&dom.stdout);
    let charts: Vec<&str> = dom.split("<figure class=\"chart\">").skip(1).collect();
    assert_eq!(charts.len(), 3, "{dom}");
    for chart in charts {
        assert!(chart.trim_start().starts_with("<svg") && chart.contains("<polyline"), "{chart}");
    }
}

/// The `<svg ...>...</svg>` documents inlined in `html`.
fn svg_documents(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("every <svg> is closed") + start + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

fn assert_well_formed(svg: &str) {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut depth = 0i32;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Start(_)) => depth += 1,
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("malformed SVG at {}: {e}\n{svg}", reader.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "every element is closed");
}

#[tokio::test]
async fn an_interrupted_bench_undoes_what_it_made() {
    let plugin = ReferenceProcess::start(&["--latency", "30ms"]).await;
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_csi_conform(
        &["bench", "--endpoint", &plugin.endpoint(), "--max-concurrency", "4", "--lifecycles", "50", "--work-dir", "work",
          "--journal", "journal.jsonl"],
        dir.path(),
    );
    // Several node publications exist (or are being made) when the signal comes.
    wait_for_journal(&dir.path().join("journal.jsonl"), "\"kind\":\"node-publication\"", 3).await;
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert_nothing_left(&plugin, dir.path()).await;
}

/// Three benches of the bundled plugin at 50 ms a call: two clean, one `slow-after-n`. With
/// 10 and 20 lifecycles a level, no p99 has the 50 calls it takes to be compared (on a busy
/// machine one stalled call is the p99 of 20): the regression shows in the throughput, which
/// every call makes. (The p99 thresholds: compare.rs's unit tests.)
#[tokio::test]
async fn compare_flags_slow_after_n_and_not_a_second_clean_bench() {
    let dir = tempfile::tempdir().unwrap();
    let bench = |json: &'static str, quirk: Option<&'static str>| {
        let dir = dir.path().to_owned();
        async move {
            let mut args = vec!["bench", "--latency", "50ms", "--max-concurrency", "2", "--lifecycles", "10", "--json", json,
                                "--html", "b.html", "--journal", "journal.jsonl", "--work-dir", "work"];
            if let Some(q) = quirk {
                args.extend(["--quirk", q]);
            }
            let out = csi_conform(&args, &dir).await;
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        }
    };
    tokio::join!(bench("old.json", None), bench("clean.json", None), bench("slow.json", Some("slow-after-n")));
    // The quirk's drop at concurrency 2 is about two thirds (every call 50 -> 150 ms); the
    // threshold here is wider than the default 25% for the noise of a machine running the
    // whole test suite at once.
    let compare = |new: &'static str| {
        let dir = dir.path().to_owned();
        async move { csi_conform(&["report", "--compare", "old.json", new, "--throughput-drop", "0.4"], &dir).await }
    };
    let clean = compare("clean.json").await;
    let text = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{text}");
    assert!(text.contains("no regression"), "{text}");
    let slow = compare("slow.json").await;
    let text = String::from_utf8_lossy(&slow.stdout);
    assert_eq!(slow.status.code(), Some(1), "{text}");
    assert!(text.contains("REGRESSION at concurrency 2: throughput"), "{text}");
}

#[tokio::test]
async fn the_soak_catches_leak_fd_per_call_and_not_a_clean_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let soak = |name: &'static str, quirk: Option<&'static str>| {
        let dir = dir.path().to_owned();
        async move {
            let json = format!("{name}.json");
            let html = format!("{name}.html");
            let mut args = vec!["bench", "--latency", "5ms", "--duration", "6s", "--sample-every", "200ms", "--concurrency", "2",
                                "--json", &json, "--html", &html, "--journal", "journal.jsonl", "--work-dir", "work"];
            if let Some(q) = quirk {
                args.extend(["--quirk", q]);
            }
            let out = csi_conform(&args, &dir).await;
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), read(&dir.join(&json)))
        }
    };
    let ((clean_code, clean_out, clean), (leak_code, leak_out, leak)) =
        tokio::join!(soak("clean", None), soak("leak", Some("leak-fd-per-call")));
    let clean_soak = clean.soak.as_ref().expect("a soak");
    // Enough samples for a verdict after the warm-up (a count of samples, not a clock).
    assert!(clean_soak.trends.iter().all(|t| t.note.is_none()), "{clean_out}");
    assert_eq!(clean_soak.findings().count(), 0, "{clean_out}");
    assert_eq!(clean_code, Some(0), "{clean_out}");
    let leak_soak = leak.soak.as_ref().expect("a soak");
    let findings: Vec<&str> = leak_soak.findings().map(|t| t.metric.as_str()).collect();
    assert_eq!(findings, ["fds"], "{leak_out}");
    assert_eq!(leak_code, Some(1), "{leak_out}");
    assert!(leak_out.contains("leak: fds keeps growing"), "{leak_out}");
    assert_eq!((clean.left_behind, leak.left_behind), (0, 0));
    // Every soak chart is well-formed SVG.
    let html = std::fs::read_to_string(dir.path().join("leak.html")).unwrap();
    let svgs = svg_documents(&html);
    assert_eq!(svgs.len(), leak_soak.trends.len());
    svgs.into_iter().for_each(assert_well_formed);
    assert!(html.contains("fds (keeps growing)"));
}
