//! The bench's human outputs: the console's compact table and the self-contained HTML page
//! (tables and inline SVG charts). Every string a plugin sent is escaped.

use std::fmt::Write as _;

use crate::report::html::escape;

use super::model::BenchReport;

/// The compact console table: one line per level, then per RPC at the highest level, the
/// process figures, the soak's verdicts.
pub fn console(report: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "bench of {} {} ({})", report.plugin_name, report.plugin_version, report.endpoints.join(", "));
    let _ = writeln!(s, "lifecycle: {}", report.lifecycle_rpcs.join(" > "));
    match (&report.process, &report.process_note) {
        (Some(p), None) => {
            let _ = writeln!(s, "plugin process: pid {} ({})", p.pid, p.how);
        }
        (_, Some(note)) => {
            let _ = writeln!(s, "plugin process: {note}");
        }
        (None, None) => {}
    }
    if !report.levels.is_empty() {
        let _ = writeln!(
            s,
            "{:>4} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6}",
            "conc", "done", "cycles/s", "rpcs/s", "p50 ms", "p99 ms", "max ms", "errors", "cpu ms/c", "peak MiB", "fds"
        );
        for l in &report.levels {
            let (cpu, rss, fds) = match l.process {
                Some(p) => (format!("{:.2}", p.cpu_ms_per_lifecycle), format!("{:.1}", p.peak_rss_kib as f64 / 1024.0), p.fds.to_string()),
                None => ("-".into(), "-".into(), "-".into()),
            };
            let _ = writeln!(
                s,
                "{:>4} {:>7} {:>9.1} {:>9.1} {:>9.2} {:>9.2} {:>9.2} {:>7} {:>9} {:>9} {:>6}",
                l.concurrency,
                l.completed,
                l.lifecycles_per_second,
                l.rpcs_per_second,
                l.lifecycle.p50_ms,
                l.lifecycle.p99_ms,
                l.lifecycle.max_ms,
                l.error_count(),
                cpu,
                rss,
                fds
            );
        }
        if let Some(last) = report.levels.last() {
            let _ = writeln!(s, "per RPC at concurrency {} (ms):", last.concurrency);
            let _ = writeln!(s, "  {:<28} {:>7} {:>8} {:>8} {:>8} {:>8}  errors", "rpc", "calls", "p50", "p90", "p99", "max");
            for rpc in &report.lifecycle_rpcs {
                let Some(p) = last.rpcs.get(rpc) else { continue };
                let errors = last.errors.get(rpc).map(|c| c.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", "));
                let _ = writeln!(
                    s,
                    "  {:<28} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>8.2}  {}",
                    rpc,
                    p.count,
                    p.p50_ms,
                    p.p90_ms,
                    p.p99_ms,
                    p.max_ms,
                    errors.unwrap_or_default()
                );
            }
        }
        let _ = writeln!(s, "ramp stopped: {}", report.stopped);
    }
    if let Some(soak) = &report.soak {
        let _ = writeln!(
            s,
            "soak: {:.0} s at concurrency {}, {} lifecycles, {} samples every {:.2} s",
            soak.seconds,
            soak.concurrency,
            soak.completed,
            soak.samples.len(),
            soak.interval_seconds
        );
        if !soak.errors.is_empty() {
            let _ = writeln!(s, "  errors: {}", soak.errors.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", "));
        }
        for t in &soak.trends {
            let verdict = match (&t.finding, &t.note) {
                (Some(f), _) => f.clone(),
                (None, Some(n)) => format!("no verdict: {n}"),
                (None, None) => "within the limits".into(),
            };
            let _ = writeln!(s, "  {:<18} {:>10.1} /min  z {:>5.1}  {}", t.metric, t.slope_per_minute, t.mk_z, verdict);
        }
    }
    let _ = writeln!(
        s,
        "{}",
        if report.left_behind == 0 {
            "nothing left behind".to_owned()
        } else {
            format!("{} resource(s) left on the plugin: see the journal (`csi-conform cleanup`)", report.left_behind)
        }
    );
    s
}

/// The HTML page: a summary, the level and per-RPC tables, the charts.
pub fn html(report: &BenchReport) -> String {
    let mut s = String::new();
    let title = format!("csi-conform bench: {} {}", report.plugin_name, report.plugin_version);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:right}}th{{background:#eee}}td:first-child{{text-align:left}}\
         .charts{{display:flex;flex-wrap:wrap;gap:1em}}.finding{{color:#b00;font-weight:bold}}</style></head><body>\n",
        escape(&title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(s, "<p>Started {} against {}. Lifecycle: {}.</p>", escape(&report.started), escape(&report.endpoints.join(", ")), escape(&report.lifecycle_rpcs.join(" → ")));
    if let Some(note) = &report.process_note {
        let _ = writeln!(s, "<p>Plugin process: {}</p>", escape(note));
    } else if let Some(p) = &report.process {
        let _ = writeln!(s, "<p>Plugin process: pid {} ({})</p>", p.pid, escape(&p.how));
    }
    if !report.levels.is_empty() {
        s.push_str("<h2>Levels</h2><table id=\"levels\"><tr><th>concurrency</th><th>lifecycles done</th><th>lifecycles/s</th><th>RPCs/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th><th>CPU ms/lifecycle</th><th>peak RSS MiB</th><th>fds</th></tr>\n");
        for l in &report.levels {
            let (cpu, rss, fds) = match l.process {
                Some(p) => (format!("{:.2}", p.cpu_ms_per_lifecycle), format!("{:.1}", p.peak_rss_kib as f64 / 1024.0), p.fds.to_string()),
                None => ("–".into(), "–".into(), "–".into()),
            };
            let errors = l.errors.values().flat_map(|c| c.iter()).map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{cpu}</td><td>{rss}</td><td>{fds}</td></tr>",
                l.concurrency, l.completed, l.lifecycles_per_second, l.rpcs_per_second, l.lifecycle.p50_ms, l.lifecycle.p90_ms, l.lifecycle.p99_ms, l.lifecycle.max_ms, escape(&errors)
            );
        }
        s.push_str("</table>\n");
        let _ = writeln!(s, "<p>Ramp stopped: {}</p>", escape(&report.stopped));
        s.push_str("<h2>Per RPC</h2><table id=\"rpcs\"><tr><th>RPC</th><th>concurrency</th><th>calls</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>errors</th></tr>\n");
        for rpc in &report.lifecycle_rpcs {
            for l in &report.levels {
                let Some(p) = l.rpcs.get(rpc) else { continue };
                let errors = l.errors.get(rpc).map(|c| c.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                let _ = writeln!(
                    s,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td></tr>",
                    escape(rpc), l.concurrency, p.count, p.p50_ms, p.p90_ms, p.p99_ms, p.max_ms, escape(&errors)
                );
            }
        }
        s.push_str("</table>\n<div class=\"charts\">\n");
        for (_, svg) in super::plot::ramp_charts(report) {
            let _ = writeln!(s, "<figure class=\"chart\">{svg}</figure>");
        }
        s.push_str("</div>\n");
    }
    if let Some(soak) = &report.soak {
        let _ = writeln!(
            s,
            "<h2>Soak</h2><p>{:.0} s at concurrency {}: {} lifecycles, {} samples every {:.2} s.</p><ul>",
            soak.seconds, soak.concurrency, soak.completed, soak.samples.len(), soak.interval_seconds
        );
        for t in &soak.trends {
            match (&t.finding, &t.note) {
                (Some(f), _) => {
                    let _ = writeln!(s, "<li class=\"finding\">{}</li>", escape(f));
                }
                (None, Some(n)) => {
                    let _ = writeln!(s, "<li>{}: no verdict ({})</li>", escape(&t.metric), escape(n));
                }
                (None, None) => {
                    let _ = writeln!(s, "<li>{}: within the limits ({:.1} per minute, z {:.1})</li>", escape(&t.metric), t.slope_per_minute, t.mk_z);
                }
            }
        }
        s.push_str("</ul><div class=\"charts\">\n");
        for (_, svg) in super::plot::soak_charts(soak) {
            let _ = writeln!(s, "<figure class=\"chart\">{svg}</figure>");
        }
        s.push_str("</div>\n");
    }
    let _ = writeln!(s, "<p>Resources left behind: {}.</p></body></html>", report.left_behind);
    s
}
