//! Orchestrator releases (`--orchestrator nomad@1.5`) and the release ranges the rows of the
//! tables hold for: a row either holds for every release the table knows, or from the first
//! release of each series that has a change (`since 1.4.12, 1.5.8, 1.6.1`: a fix merged once
//! and backported), or before it (the behaviour the change replaced). Parsing and comparing
//! only; which rows a range picks is the tables' business.

use std::{cmp::Ordering, fmt};

/// One release of an orchestrator (`1.5`, `1.26.3`; Docker Engine's `23.0` for Swarm). A
/// release given without its patch number is that series' first (`1.5` is `1.5.0`): the
/// oldest, and so the widest, behaviour a `1.5.x` can have.
#[derive(Debug, Clone, Copy, Eq)]
pub struct Release {
    major: u32,
    minor: u32,
    patch: u32,
    /// How many of the three numbers were written (2 or 3), to show it as given.
    written: u8,
}

impl Release {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Release {
        Release { major, minor, patch, written: 3 }
    }

    /// Parses `1.5`, `1.5.8` or `v1.26.3`: two or three decimal numbers; nothing else.
    pub fn parse(text: &str) -> Option<Release> {
        let digits = text.strip_prefix(['v', 'V']).unwrap_or(text);
        let parts: Vec<&str> = digits.split('.').collect();
        if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        let number = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse::<u32>().ok());
        Some(Release { major: number(0)?, minor: number(1)?, patch: number(2)?, written: parts.len() as u8 })
    }

    /// The first release of its series (`1.5.0` of `1.5.8`).
    pub fn series_start(self) -> Release {
        Release::new(self.major, self.minor, 0)
    }

    /// Its series (`1.5` of `1.5.8`).
    fn series(self) -> (u32, u32) {
        (self.major, self.minor)
    }

    fn key(self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }
}

impl PartialEq for Release {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Ord for Release {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Release {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Release {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.written == 2 { write!(f, "{}.{}", self.major, self.minor) } else { write!(f, "{}.{}.{}", self.major, self.minor, self.patch) }
    }
}

/// The releases a row of a table holds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// Every release the table knows (and the current ones).
    All,
    /// From the first release of each listed series that has the change, in every later
    /// series, and in no earlier or unlisted series (the change was not backported there).
    /// Ascending.
    Since(&'static [Release]),
    /// Exactly the releases `Since` of the same list leaves out: the behaviour it replaced.
    Before(&'static [Release]),
}

impl Range {
    /// Whether the row holds for `at` (`None`: the current releases).
    pub fn holds(self, at: Option<Release>) -> bool {
        match (self, at) {
            (Range::All, _) => true,
            (Range::Since(_), None) => true,
            (Range::Before(_), None) => false,
            (Range::Since(firsts), Some(at)) => since(firsts, at),
            (Range::Before(firsts), Some(at)) => !since(firsts, at),
        }
    }

    /// Parses what [`Display`](fmt::Display) writes: `all`, `since 1.4.12, 1.5.8` or
    /// `before 1.24.0` (full releases, ascending).
    pub fn parse(text: &str) -> Option<(bool, Vec<Release>)> {
        let (since, list) = if let Some(rest) = text.strip_prefix("since ") {
            (true, rest)
        } else {
            (false, text.strip_prefix("before ")?)
        };
        let releases: Option<Vec<Release>> = list.split(", ").map(Release::parse).collect();
        releases.filter(|r| !r.is_empty() && r.windows(2).all(|w| w[0] < w[1])).map(|r| (since, r))
    }

    /// The releases named, if any.
    pub fn releases(self) -> &'static [Release] {
        match self {
            Range::All => &[],
            Range::Since(r) | Range::Before(r) => r,
        }
    }
}

/// Whether `at` has the change first released in `firsts` (one first release per series).
fn since(firsts: &[Release], at: Release) -> bool {
    match firsts.iter().find(|f| f.series() >= at.series()) {
        Some(first) if first.series() == at.series() => at >= *first,
        // An earlier series than every listed one, or one between them without the change.
        Some(_) => false,
        None => true,
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, list) = match self {
            Range::All => return f.write_str("all"),
            Range::Since(r) => ("since", r),
            Range::Before(r) => ("before", r),
        };
        let list: Vec<String> = list.iter().map(Release::to_string).collect();
        write!(f, "{word} {}", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKPORTED: &[Release] = &[Release::new(1, 4, 12), Release::new(1, 5, 8), Release::new(1, 6, 1)];
    const SKIPS_1_5: &[Release] = &[Release::new(1, 4, 2), Release::new(1, 6, 0)];
    const ONE_24: &[Release] = &[Release::new(1, 24, 0)];

    fn at(text: &str) -> Option<Release> {
        Some(Release::parse(text).unwrap())
    }

    #[test]
    fn releases_parse_two_or_three_numbers_and_show_as_written() {
        assert_eq!(Release::parse("1.5"), Some(Release::new(1, 5, 0)));
        assert_eq!(Release::parse("v1.26.3"), Some(Release::new(1, 26, 3)));
        assert_eq!(Release::parse("1.5").unwrap().to_string(), "1.5");
        assert_eq!(Release::parse("1.5.0").unwrap().to_string(), "1.5.0");
        for bad in ["", "1", "1.", "1.x", "1.2.3.4", "latest", "1.5-rc1", "+1.5"] {
            assert_eq!(Release::parse(bad), None, "{bad}");
        }
        assert!(Release::parse("1.10").unwrap() > Release::parse("1.9.9").unwrap());
    }

    #[test]
    fn a_backported_change_holds_from_the_first_release_of_each_series_that_has_it() {
        let s = Range::Since(BACKPORTED);
        assert!(!s.holds(at("1.3.5")), "a series before every backport");
        assert!(!s.holds(at("1.4.11")) && s.holds(at("1.4.12")));
        assert!(!s.holds(at("1.5")) && s.holds(at("1.5.8")));
        assert!(!s.holds(at("1.6.0")) && s.holds(at("1.6.1")));
        assert!(s.holds(at("1.7")) && s.holds(None), "later series and the current releases");
        for r in ["1.3", "1.4.11", "1.4.12", "1.5", "1.6.1", "1.9"] {
            assert_ne!(Range::Before(BACKPORTED).holds(at(r)), s.holds(at(r)), "{r}");
        }
        assert!(!Range::Since(SKIPS_1_5).holds(at("1.5.9")), "not backported to 1.5");
        assert!(Range::All.holds(at("0.1")) && Range::All.holds(None));
    }

    #[test]
    fn a_range_reads_back_what_it_writes() {
        for range in [Range::Since(BACKPORTED), Range::Before(ONE_24)] {
            let (since, list) = Range::parse(&range.to_string()).unwrap();
            assert_eq!((since, list.as_slice()), (matches!(range, Range::Since(_)), range.releases()));
        }
        assert_eq!(Range::parse("since 1.6.1, 1.5.8"), None, "not ascending");
        assert_eq!(Range::parse("after 1.0.0"), None);
    }
}
