//! Tests of [`super`]: every encoding of a held value is blanked, cut prefixes too, and the
//! short-value rule holds.

use super::*;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

#[test]
fn scrubs_held_values_longest_first_and_ignores_short_ones() {
    let s = Scrubber::new();
    assert!(s.is_empty(), "a new scrubber holds nothing");
    s.add(["hunter2", "hunter2-extended", "ro", "hunter2"]);
    assert_eq!(s.len(), 2, "short and repeated values are not held");
    assert!(!s.is_empty());
    assert_eq!(s.scrub("a hunter2-extended b hunter2 error"), "a <redacted> b <redacted> error");
    assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
    assert_eq!(format!("{s:?}"), "Scrubber { values: 2 }");
}

/// The short-value rule: under [`MIN_LEN`] characters nothing is blanked from free text (so
/// `ro` and `1` stay readable everywhere); from [`MIN_LEN`] on, the value and its escapes are.
#[test]
fn values_under_the_minimum_stay_readable_and_the_minimum_is_blanked() {
    let s = Scrubber::new();
    s.add(["a", "ro", "key"]);
    assert!(s.is_empty());
    assert_eq!(s.scrub("a ro key ..."), "a ro key ...");
    s.add(["abcd"]);
    assert_eq!(s.scrub("x abcd y"), "x <redacted> y");
    // Its base64 determines at most 5 characters: not blanked (they occur by chance).
    let b64 = STANDARD.encode("abcd");
    assert_eq!(s.scrub(&b64), b64);
    // From 5 bytes on it is, at every alignment.
    s.add(["abcde"]);
    for prefix in ["", "x", "xy"] {
        let encoded = STANDARD.encode(format!("{prefix}abcde!"));
        assert!(s.scrub(&encoded).contains(REDACTED), "{prefix:?}: {encoded}");
    }
}

const NASTY: &str = "p\"a\\ss w/ord+é€😀<&>'\t";

fn held() -> Scrubber {
    let s = Scrubber::new();
    s.add([NASTY, &"L".repeat(40).chars().chain("0123456789".repeat(6).chars()).collect::<String>()]);
    s
}

/// Every encoding, produced by an independent encoder around other text, is blanked: none of
/// the value's characters that the encoding determines survives.
#[test]
fn every_encoding_of_a_value_is_blanked_wherever_it_sits() {
    let s = held();
    let mut encodings: Vec<(String, String)> = vec![
        ("raw".into(), NASTY.to_owned()),
        ("json".into(), serde_json::to_string(NASTY).unwrap()),
        ("json of json".into(), serde_json::to_string(&serde_json::to_string(NASTY).unwrap()).unwrap()),
        ("debug".into(), format!("{NASTY:?}")),
        ("yaml".into(), serde_yaml::to_string(NASTY).unwrap()),
        ("yaml single".into(), format!("'{}'", NASTY.replace('\'', "''"))),
        ("hex".into(), NASTY.bytes().map(|b| format!("{b:02x}")).collect()),
        ("HEX".into(), NASTY.bytes().map(|b| format!("{b:02X}")).collect()),
        ("url".into(), NASTY.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()),
    ];
    // Python's json.dumps (ASCII only).
    let ascii: String = serde_json::to_string(NASTY)
        .unwrap()
        .chars()
        .flat_map(|c| {
            if c.is_ascii() {
                vec![c.to_string()]
            } else {
                let mut b = [0u16; 2];
                c.encode_utf16(&mut b).iter().map(|u| format!("\\u{u:04x}")).collect()
            }
        })
        .collect();
    encodings.push(("json ascii".into(), ascii));
    for (name, engine) in [("b64", STANDARD), ("b64nopad", STANDARD_NO_PAD), ("b64url", URL_SAFE), ("b64urlnopad", URL_SAFE_NO_PAD)] {
        for prefix in ["", "k", "ke"] {
            encodings.push((format!("{name}+{}", prefix.len()), engine.encode(format!("{prefix}{NASTY}tail"))));
        }
    }
    for (name, encoded) in encodings {
        let text = format!("error: got {encoded} from the backend");
        let out = s.scrub(&text);
        assert!(out.contains(REDACTED), "{name}: {out}");
        assert!(!out.contains(encoded.trim_matches(['"', '\'', '\n'])), "{name}: {out}");
        // What is left of a base64 text is at most the characters shared with its neighbours.
        if name.starts_with("b64") {
            let kept = out.trim_start_matches("error: got ").trim_end_matches(" from the backend");
            assert!(kept.len() <= REDACTED.len() + 8 + 6, "{name}: {out}");
        }
    }
}

/// A value cut before it was scrubbed (`'abc...'`, `"abc"...`, `abc…`) has its head blanked.
#[test]
fn a_prefix_cut_before_scrubbing_is_blanked() {
    let s = held();
    let long = "L".repeat(40) + &"0123456789".repeat(6);
    let head: String = long.chars().take(60).collect();
    assert_eq!(s.scrub(&format!("volume_context.k='{head}...'")), "volume_context.k='<redacted>...'");
    assert_eq!(s.scrub(&format!("value {:?}... (100 bytes)", &long[..50])), "value \"<redacted>\"... (100 bytes)");
    assert_eq!(s.scrub(&format!("{}…", &long[..30])), "<redacted>…");
    assert_eq!(s.scrub("csi-conform run ... --focus x"), "csi-conform run ... --focus x", "no head, nothing blanked");
    let json_head = &serde_json::to_string(NASTY).unwrap()[1..12];
    assert_eq!(s.scrub(&format!("m: {json_head}...")), "m: <redacted>...");
}

#[test]
fn clean_scrubs_then_caps_every_string_of_a_report() {
    let s = held();
    let long = "L".repeat(40) + &"0123456789".repeat(6);
    let item: std::collections::BTreeMap<String, Vec<String>> =
        [("name".to_owned(), vec![format!("x{long}"), "n".repeat(REPORT_STRING_MAX * 3)])].into();
    let cleaned = s.clean(&item).unwrap();
    let texts = &cleaned["name"];
    assert_eq!(texts[0], "x<redacted>");
    assert!(texts[1].len() < REPORT_STRING_MAX + 64, "{}", texts[1].len());
    assert!(texts[1].ends_with(&format!("… ({} more bytes cut)", REPORT_STRING_MAX * 2)), "{}", &texts[1][REPORT_STRING_MAX..]);
    assert_eq!(cap("short", 10), "short");
    assert_eq!(cap("ééé", 2), "éé… (2 more bytes cut)");
}

#[test]
fn the_writer_scrubs_a_value_split_across_writes() {
    let s = Scrubber::new();
    s.add(["Zq7secret"]);
    let mut out = Vec::new();
    {
        let mut w = ScrubbingWriter::new(s.clone(), &mut out);
        w.write_all(b"token=Zq7s").unwrap();
        w.write_all(b"ecret end\n").unwrap();
    }
    assert_eq!(String::from_utf8(out).unwrap(), "token=<redacted> end\n");
}

#[test]
fn flush_writes_the_buffered_line_scrubbed_while_the_writer_lives() {
    let s = Scrubber::new();
    s.add(["Zq7secret"]);
    let mut w = ScrubbingWriter::new(s, Vec::new());
    w.write_all(b"token=Zq7secret\n").unwrap();
    assert!(w.inner.is_empty(), "nothing reaches the inner writer before the event ends");
    w.flush().unwrap();
    assert_eq!(w.inner, b"token=<redacted>\n", "flush emits the line, scrubbed");
    w.flush().unwrap();
    assert_eq!(w.inner, b"token=<redacted>\n", "a second flush writes nothing again");
}
