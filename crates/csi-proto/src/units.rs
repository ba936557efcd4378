//! Units operators write on command lines and in config files: durations (`500ms`, `30s`,
//! `2m`) and byte sizes (`10Gi`, `512Mi`, `1073741824`).

use std::time::Duration;

/// Parses `500ms`, `2s`, `1m`, `1h`, `250us`, `0`; a bare number means seconds. Go's
/// compound form (`1h30m`, `1m0.5s`, as csi-sanity's and ginkgo's duration flags take) is
/// accepted too.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("{text:?} is not a duration like 500ms, 2s or 1m"));
    }
    let mut rest = t;
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?} is not a duration like 500ms, 2s or 1m"))?;
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let factor = match unit.trim() {
            "" if rest.len() == t.len() => 1.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("{text:?}: a number without a unit after the first part")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (use ns, us, ms, s, m or h)"
                ));
            }
        };
        seconds += value * factor;
        rest = next;
    }
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("{text:?} is not a valid duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a byte count: `1073741824`, `512Mi`, `1Gi`, `1GiB`, `1Ti`, `10G` (decimal).
pub fn parse_bytes(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count"))?;
    let unit = unit.trim().trim_end_matches('B');
    let factor: i64 = match unit {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        other => return Err(format!("{text:?}: unknown unit {other:?}")),
    };
    value
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: i64 = 1 << 30;
    const TIB: i64 = 1 << 40;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1m0.5s").unwrap(), Duration::from_millis(60_500));
        assert_eq!(parse_duration("1h0m0s").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_bytes("1Ti").unwrap(), TIB);
        assert_eq!(parse_bytes("1GiB").unwrap(), GIB);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("1Xi").is_err());
        assert!(parse_bytes("99999999999Pi").is_err());
    }
}
