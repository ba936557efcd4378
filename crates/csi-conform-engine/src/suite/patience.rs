//! How long the run waits for what the spec lets a plugin finish later, and what it says when
//! a wait runs out: readiness (a snapshot's `ready_to_use`, a `poll:` step's condition) is
//! bounded by `--ready-timeout`; an effect on the node the plugin answered OK for (an
//! expansion becoming visible) is looked for again for `--settle-time`, or longer when the
//! plugin answers slowly ([`settle`]). A bound is not a verdict: where the spec sets no
//! deadline, a wait that runs out makes the step inconclusive ([`ran_out`]), naming the flag
//! that bounds it, never a failure.

use std::time::Duration;

use super::settings::Waits;
use crate::{client::Scaled, report::Finding};

/// The default bound of a wait for readiness where no `poll:` step says otherwise (the data
/// check's snapshots), and what the built-in suites' readiness polls say.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(300);

pub use super::settings::DEFAULT_SETTLE_TIME;

/// How many of the plugin's p90 answer times a settle wait lasts when that is longer than
/// `--settle-time`: a node that needs a few of its plugin's answer times to show what the
/// plugin did is given them. The p90 includes the plugin's queueing behind the run's own
/// calls, so the wait grows with `--jobs` as the plugin slows under it; a few p90s, not
/// more, because the run's load already inflates each.
pub const SETTLE_FACTOR: u32 = 5;

/// The longest pause between two looks of a settle wait.
pub const SETTLE_LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// The bound of a wait for readiness: `--ready-timeout` when given, else `own` (a `poll:`
/// step's `timeout`, or [`DEFAULT_READY_TIMEOUT`]), with how a finding names it.
pub fn ready_bound(waits: Waits, own: Option<Duration>) -> (Duration, String) {
    match (waits.ready_timeout, own) {
        (Some(flag), _) => (flag, "--ready-timeout".to_owned()),
        (None, Some(step)) => (step, "the step's poll.timeout; --ready-timeout overrides it".to_owned()),
        (None, None) => (DEFAULT_READY_TIMEOUT, "--ready-timeout".to_owned()),
    }
}

/// How long an effect on the node that the plugin answered OK for is looked for again
/// before it is judged: `--settle-time`, or [`SETTLE_FACTOR`] times the p90 of the plugin's
/// answer times so far when that is longer (never more than `--ready-timeout`'s bound).
pub fn settle(waits: Waits, p90: Option<Duration>) -> Duration {
    let cap = waits.ready_timeout.unwrap_or(DEFAULT_READY_TIMEOUT);
    Scaled { factor: SETTLE_FACTOR, floor: waits.settle_time, cap }.of(p90)
}

/// How a finding names a settle wait of `waited`.
pub fn settle_bound(waited: Duration) -> String {
    format!(
        "{} (--settle-time, or {SETTLE_FACTOR} times the p90 of the plugin's answer times when longer)",
        crate::client::human_duration(waited)
    )
}

/// The finding of a wait that ran out where the spec sets no deadline: the step is
/// inconclusive, never failed.
pub fn ran_out(message: impl Into<String>) -> Finding {
    Finding::inconclusive("bound-ran-out", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::settings::RunConfig;

    #[test]
    fn a_settle_wait_is_the_flag_or_the_plugins_pace_whichever_is_longer() {
        let mut config = RunConfig { settle_time: Duration::from_millis(250), ..RunConfig::default() };
        assert_eq!(settle(config.waits(), None), Duration::from_millis(250));
        assert_eq!(settle(config.waits(), Some(Duration::from_millis(2))), Duration::from_millis(250));
        assert_eq!(settle(config.waits(), Some(Duration::from_millis(400))), Duration::from_secs(2));
        config.ready_timeout = Some(Duration::from_secs(1));
        assert_eq!(settle(config.waits(), Some(Duration::from_millis(400))), Duration::from_secs(1), "never past --ready-timeout");
    }

    #[test]
    fn the_ready_bound_is_the_flag_when_given_else_the_steps_own() {
        let mut config = RunConfig::default();
        assert_eq!(ready_bound(config.waits(), Some(Duration::from_secs(7))).0, Duration::from_secs(7));
        assert_eq!(ready_bound(config.waits(), None), (DEFAULT_READY_TIMEOUT, "--ready-timeout".to_owned()));
        config.ready_timeout = Some(Duration::from_secs(3));
        assert_eq!(ready_bound(config.waits(), Some(Duration::from_secs(7))).0, Duration::from_secs(3));
    }
}
