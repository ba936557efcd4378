//! The plugin's observed answer times ([`Latency`]: the p90 of the latest answers on a
//! connection) and the waits scaled from them ([`Scaled`], [`Pacer`]), so that the run never
//! waits a fixed figure where the plugin's own pace will do.
//!
//! What "observed" means with the run's own concurrency: an answer time is measured here,
//! from the request leaving to the answer arriving, so it includes the time the plugin kept
//! the call queued behind the run's other calls in flight (a plugin serialising its calls
//! answers slower at `--jobs 32` than at `--jobs 1`), and the waits grow with it; that is
//! what keeps a bound as generous under load as alone. It does not include the run's own
//! waiting before a call is sent (budgets, permits, contention retries), nor calls the
//! plugin never answered (a deadline, a lost connection): those say nothing of its pace.

use std::{collections::VecDeque, sync::Mutex, time::Duration};

/// How many of the latest answers [`Latency::p90`] looks at: recent enough to follow the
/// plugin's pace through the run, enough that one slow answer is not the p90.
pub const LATENCY_WINDOW: usize = 256;

/// The answer times of the latest calls on one connection.
#[derive(Debug, Default)]
pub struct Latency {
    recent: Mutex<VecDeque<Duration>>,
}

impl Latency {
    /// Records one answer's time (the oldest beyond [`LATENCY_WINDOW`] is forgotten).
    pub fn record(&self, took: Duration) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == LATENCY_WINDOW {
            recent.pop_front();
        }
        recent.push_back(took);
    }

    /// The 90th percentile of the latest answer times (nearest rank), none before the first
    /// answer.
    pub fn p90(&self) -> Option<Duration> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let mut sorted: Vec<Duration> = recent.iter().copied().collect();
        drop(recent);
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_unstable();
        // Nearest rank: the smallest time at least 90% of the answers did not exceed.
        let rank = (sorted.len() * 9).div_ceil(10);
        Some(sorted[rank.max(1) - 1])
    }
}

/// A wait scaled from the plugin's observed latency: `factor` times its p90, never less than
/// `floor` (also what it is before any answer was seen) nor more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scaled {
    /// How many p90s the wait is.
    pub factor: u32,
    /// The least it is.
    pub floor: Duration,
    /// The most it is.
    pub cap: Duration,
}

impl Scaled {
    /// The wait, given the p90 of the plugin's answer times so far.
    pub fn of(&self, p90: Option<Duration>) -> Duration {
        let scaled = p90.map_or(Duration::ZERO, |p| p.saturating_mul(self.factor));
        scaled.max(self.floor).min(self.cap.max(self.floor))
    }
}

/// The pauses between the looks of a poll: the first is a couple of the plugin's answer
/// times (so a condition met at once costs next to nothing), each next one twice as long, up
/// to `longest`, and never past the poll's deadline: the last look is made at the deadline
/// itself, so a poll that ends does so having looked at its bound.
#[derive(Debug, Clone)]
pub struct Pacer {
    next: Duration,
    longest: Duration,
}

/// The least pause between two looks of a poll, however fast the plugin answers.
pub const LEAST_PAUSE: Duration = Duration::from_millis(10);

impl Pacer {
    /// Pauses starting at twice `p90` (at least [`LEAST_PAUSE`]), doubling up to `longest`.
    pub fn new(p90: Option<Duration>, longest: Duration) -> Pacer {
        let first = Scaled { factor: 2, floor: LEAST_PAUSE, cap: longest }.of(p90);
        Pacer { next: first, longest: longest.max(LEAST_PAUSE) }
    }

    /// The pause before the next look, `left` before the deadline: none when the deadline
    /// has passed (the poll is over), else at most `left`.
    pub fn pause(&mut self, left: Duration) -> Option<Duration> {
        if left.is_zero() {
            return None;
        }
        let pause = self.next.min(left);
        self.next = self.next.saturating_mul(2).min(self.longest);
        Some(pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_p90_is_the_nearest_rank_of_the_latest_answers() {
        let latency = Latency::default();
        assert_eq!(latency.p90(), None);
        for ms in 1..=10 {
            latency.record(MS * ms);
        }
        assert_eq!(latency.p90(), Some(MS * 9));
        latency.record(MS * 500);
        assert_eq!(latency.p90(), Some(MS * 10), "one slow answer in eleven is not the p90");
        // The window forgets the oldest: a plugin that got slow is seen as slow.
        for _ in 0..LATENCY_WINDOW {
            latency.record(MS * 40);
        }
        assert_eq!(latency.p90(), Some(MS * 40));
    }

    #[test]
    fn a_scaled_wait_follows_the_plugin_between_its_floor_and_its_cap() {
        let wait = Scaled { factor: 20, floor: MS * 100, cap: Duration::from_secs(60) };
        assert_eq!(wait.of(None), MS * 100, "no answer seen yet: the floor");
        assert_eq!(wait.of(Some(MS)), MS * 100, "a fast plugin: the floor");
        assert_eq!(wait.of(Some(MS * 50)), Duration::from_secs(1), "20 p90s");
        assert_eq!(wait.of(Some(Duration::from_secs(10))), Duration::from_secs(60), "never past the cap");
        let odd = Scaled { factor: 20, floor: Duration::from_secs(5), cap: Duration::from_secs(1) };
        assert_eq!(odd.of(Some(MS)), Duration::from_secs(5), "a cap under the floor is the floor");
    }

    #[test]
    fn a_poll_starts_at_the_plugins_pace_doubles_and_looks_last_at_its_deadline() {
        let mut pacer = Pacer::new(Some(MS * 7), MS * 40);
        let left = Duration::from_secs(1);
        let pauses: Vec<Duration> = (0..5).map(|_| pacer.pause(left).unwrap()).collect();
        assert_eq!(pauses, [MS * 14, MS * 28, MS * 40, MS * 40, MS * 40]);
        assert_eq!(pacer.pause(MS * 7), Some(MS * 7), "the last pause ends at the deadline");
        assert_eq!(pacer.pause(Duration::ZERO), None, "past the deadline the poll is over");
        let mut fast = Pacer::new(Some(Duration::from_micros(100)), Duration::from_secs(5));
        assert_eq!(fast.pause(left), Some(LEAST_PAUSE), "never hammered");
    }
}
