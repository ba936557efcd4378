//! The live console of a run: on a terminal, a progress bar with the counts so far and the
//! scenarios running, with each finished scenario's line printed above it; when output is not
//! a terminal (or `CI` is set), the same lines alone, plain; with `-q`, nothing until the
//! summary. Lines come in the order scenarios finish, so a slow scenario never holds back
//! the others; every report file (and the summary) keeps suite order.
//!
//! Log lines (`-v`, `RUST_LOG`) go through [`log_writer`], which lifts the bar while a line
//! is written so the two never tear each other.

use std::{
    io::{self, Write as _},
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{
    console::scenario_line,
    expect::ExpectedFailures,
    model::{Counts, ScenarioResult},
    text,
};

/// Hears of scenarios as they start and finish, for a live display. Calls come from the
/// scenarios' tasks, concurrently and in the order things happen (not suite order); they must
/// not block.
pub trait Progress: Send + Sync {
    /// The run selected `total` scenarios (called once, before any starts).
    fn begin(&self, total: usize);
    /// A scenario started.
    fn started(&self, scenario_id: &str);
    /// A scenario finished, teardown included (called before its budget is released, so
    /// no scenario that needed that budget has started yet).
    fn finished(&self, result: &ScenarioResult);
    /// The run was stopped (its timeout, or an interruption), for `reason`: no scenario starts
    /// from now on; those in flight finish. Called once, at the moment of the decision.
    fn interrupted(&self, reason: &str) {
        let _ = reason;
    }
    /// A scenario already reported [`finished`](Self::finished) has a new outcome: what was
    /// deleted at its teardown (or by its property cases) was decided after it ended (the
    /// plugin kept an object, say). Called once per such scenario, after the last scenario
    /// finished.
    fn amended(&self, result: &ScenarioResult) {
        let _ = result;
    }
}

/// How the live console shows a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A progress bar on stderr, lines above it.
    Bar,
    /// One plain line per finished scenario on stdout.
    Lines,
    /// Nothing until the summary (`-q`).
    Quiet,
}

impl Mode {
    /// The mode this process should use: quiet when asked; a bar only when both stdout and
    /// stderr are terminals, `CI` is unset and `TERM` is not `dumb`; plain lines otherwise.
    pub fn detect(quiet: bool) -> Mode {
        use std::io::IsTerminal;
        let term_dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        if quiet {
            Mode::Quiet
        } else if io::stdout().is_terminal() && io::stderr().is_terminal() && std::env::var_os("CI").is_none() && !term_dumb
        {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

/// Whether output to a terminal should be coloured: it is a terminal and `NO_COLOR` is unset
/// (or empty, as the convention says).
pub fn color_for(stream_is_terminal: bool) -> bool {
    stream_is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The bar in use, for [`log_writer`].
static ACTIVE_BAR: OnceLock<Mutex<Option<ProgressBar>>> = OnceLock::new();

fn active_bar() -> Option<ProgressBar> {
    ACTIVE_BAR.get()?.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn set_active_bar(bar: Option<ProgressBar>) {
    *ACTIVE_BAR.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner()) = bar;
}

/// Writes to stderr, lifting the progress bar (if one is shown) while it does.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match active_bar() {
            Some(bar) => bar.suspend(|| io::stderr().write(buf)),
            None => io::stderr().write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match active_bar() {
            Some(bar) => bar.suspend(|| io::stderr().write_all(buf)),
            None => io::stderr().write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// The writer for the log subscriber (`tracing_subscriber::fmt().with_writer(log_writer)`).
pub fn log_writer() -> LogWriter {
    LogWriter
}

/// What the bar shows besides the bar itself.
#[derive(Default)]
struct State {
    counts: Counts,
    running: Vec<String>,
}

/// The live console: a [`Progress`] for the suite engine.
pub struct ConsoleProgress {
    mode: Mode,
    color: bool,
    strict: bool,
    expected: Option<ExpectedFailures>,
    bar: Option<ProgressBar>,
    state: Mutex<State>,
}

impl ConsoleProgress {
    /// A console in `mode`; `color` for the scenario lines; `expected` marks listed
    /// scenarios' lines as the final report will.
    pub fn new(mode: Mode, color: bool, strict: bool, expected: Option<ExpectedFailures>) -> Arc<Self> {
        let bar = (mode == Mode::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(250));
            set_active_bar(Some(bar.clone()));
            bar
        });
        Arc::new(ConsoleProgress { mode, color, strict, expected, bar, state: Mutex::default() })
    }

    /// Takes the bar down (call once the run is over, before the summary).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            set_active_bar(None);
        }
    }

    fn update_message(&self, state: &State) {
        let Some(bar) = &self.bar else { return };
        let c = &state.counts;
        let mut msg = format!("{} passed, {} failed, {} skipped", c.pass, c.fail + c.error, c.skip);
        if c.warn > 0 {
            msg.push_str(&format!(", {} warned", c.warn));
        }
        if let Some(first) = state.running.first() {
            msg.push_str(&format!(" | {}", text::one_line(first)));
            if state.running.len() > 1 {
                msg.push_str(&format!(" (+{} more)", state.running.len() - 1));
            }
        }
        bar.set_message(msg);
    }
}

impl ConsoleProgress {
    /// `result` marked as the final report will (`[expected failure]`).
    fn marked(&self, result: &ScenarioResult) -> ScenarioResult {
        let mut marked = result.clone();
        if let Some(list) = &self.expected {
            list.mark(&mut marked, self.strict);
        }
        marked
    }
}

impl Progress for ConsoleProgress {
    fn amended(&self, result: &ScenarioResult) {
        if self.mode == Mode::Quiet {
            return;
        }
        let line = format!(
            "{} (amended after the scenario ended: what it deleted was checked later)",
            scenario_line(&self.marked(result), self.color)
        );
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => {
                let _ = writeln!(io::stdout().lock(), "{line}");
            }
        }
    }

    fn begin(&self, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
    }

    fn started(&self, scenario_id: &str) {
        if self.mode != Mode::Bar {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.running.push(scenario_id.to_owned());
        self.update_message(&state);
    }

    fn finished(&self, result: &ScenarioResult) {
        if self.mode == Mode::Quiet {
            return;
        }
        let line = scenario_line(&self.marked(result), self.color);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &self.bar {
            Some(bar) => {
                bar.suspend(|| println!("{line}"));
                state.counts.add(result.outcome);
                if let Some(i) = state.running.iter().position(|id| *id == result.id) {
                    state.running.remove(i);
                }
                bar.inc(1);
                self.update_message(&state);
            }
            None => {
                let mut out = io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
        }
    }
}
