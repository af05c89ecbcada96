//! Common and Combined Log Format lines scanned straight to the fields replay uses.
//! Most logs are in one of these two layouts, and the format-string walk spends most of
//! its time on fields replay ignores. The scan accepts only lines the walk would accept,
//! with the same fields; any line it is unsure of (a malformed one, an escaped quote in
//! the user agent) it leaves to the walk, which also words the error.

use super::format::{find_byte, find_delimiter, parse_time, parse_u64, Fields};
use std::borrow::Cow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Common,
    Combined,
}

/// The last time text parsed and its value less its seconds: consecutive lines share
/// the date, hour and minute, so most lines reparse only the two digits of seconds.
#[derive(Default)]
pub struct LastTime {
    text: Vec<u8>,
    minus_seconds: i64,
}

impl LastTime {
    /// As `parse_time`.
    #[inline]
    fn parse(&mut self, text: &[u8]) -> Option<i64> {
        let seconds = |t: &[u8]| {
            let (tens, ones) = (t[18].wrapping_sub(b'0'), t[19].wrapping_sub(b'0'));
            (tens < 10 && ones < 10).then_some(tens as i64 * 10 + ones as i64)
        };
        let same_minute = text.len() == self.text.len() && text.len() >= 20 && same_but_seconds(text, &self.text);
        if same_minute {
            // parse_time's only check on the seconds: two digits, at most 60.
            return seconds(text).filter(|&s| s <= 60).map(|s| self.minus_seconds + s);
        }
        let time = parse_time(text)?;
        self.text.clear();
        self.text.extend_from_slice(text);
        self.minus_seconds = time - seconds(text).expect("parse_time checked the digits");
        Some(time)
    }
}

/// Whether two time texts of one length (at least 20) differ at most in the seconds
/// (bytes 18 and 19): the usual 26 bytes as four words, not two memcmp calls per line.
#[inline]
fn same_but_seconds(a: &[u8], b: &[u8]) -> bool {
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let differ = |at: usize| word(a, at) ^ word(b, at);
    match a.len() {
        // 0..8, 8..16, 10..18, and 18..26 less its first two bytes (little-endian: the low 16 bits).
        26 => (differ(0) | differ(8) | differ(10) | (differ(18) & !0xffff)) == 0,
        _ => a[..18] == b[..18] && a[20..] == b[20..],
    }
}

/// The fields of a line in `layout`, or None where the format-string walk must decide.
#[inline]
pub fn scan<'a>(line: &'a [u8], layout: Layout, last_time: &mut LastTime) -> Option<Fields<'a>> {
    // %h %l %u: each ends at the next space.
    let mut p = 0;
    for _ in 0..3 {
        p += find_byte(b' ', &line[p..])? + 1;
    }
    // [%t]
    if line.get(p) != Some(&b'[') {
        return None;
    }
    // The usual "dd/Mon/yyyy:HH:MM:SS +zone": parse_time checks each of its 26 bytes, so
    // if it parses, the ']' after it is the first.
    let close = match line.get(p + 27) {
        Some(b']') if line[p + 21] == b' ' => p + 27,
        _ => p + memchr::memchr(b']', &line[p..])?,
    };
    let time = last_time.parse(&line[p + 1..close])?;
    p = close + 1;
    // "%r": method and target are its first two words (single spaces: others go the long way).
    if line.get(p..p + 2)? != b" \"" {
        return None;
    }
    p += 2;
    let request = &line[p..p + find_delimiter(&line[p..], b"\" ", true)?];
    p += request.len() + 2;
    let method_end = find_byte(b' ', request).filter(|&i| i > 0)?;
    let rest = &request[method_end + 1..];
    let target = &rest[..find_byte(b' ', rest).unwrap_or(rest.len())];
    if target.is_empty() {
        return None;
    }
    // %>s: three digits and a space.
    let status = line.get(p..p + 4)?;
    if status[3] != b' ' {
        return None;
    }
    let status = parse_u64(&status[..3]).filter(|s| (100..1000).contains(s))? as u16;
    p += 4;
    // %b: digits (at most 19, as the walk takes) or "-".
    let digits = line[p..].iter().take(20).take_while(|c| c.is_ascii_digit()).count();
    let (bytes, end) = match digits {
        0 if line.get(p) == Some(&b'-') => (0, p + 1),
        1..=19 => (parse_u64(&line[p..p + digits])?, p + digits),
        _ => return None,
    };
    match layout {
        Layout::Common if end != line.len() => return None,
        Layout::Common => {}
        Layout::Combined => {
            // "%{Referer}i": up to the first quote, which must not be escaped and must be
            // followed by ` "`; "%{User-agent}i": its only quote is the line's last byte.
            if line.get(end..end + 2)? != b" \"" {
                return None;
            }
            let referer = end + 2;
            let quote = referer + find_byte(b'"', &line[referer..])?;
            if (quote > referer && line[quote - 1] == b'\\') || line.get(quote + 1..quote + 3)? != b" \"" {
                return None;
            }
            let agent = quote + 3;
            if line.last() != Some(&b'"') || line.len() <= agent || find_byte(b'"', &line[agent..line.len() - 1]).is_some() {
                return None;
            }
        }
    }
    Some(Fields { time, method: &request[..method_end], target: Cow::Borrowed(target), status, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::format::{Format, COMBINED, COMMON};

    /// The walk's fields of `line`, for comparison.
    fn walked<'a>(format: &Format, line: &'a [u8]) -> Option<Fields<'a>> {
        format.parse_line(line).and_then(|e| e.fields()).ok()
    }

    #[test]
    fn the_scan_takes_only_what_the_walk_takes_and_reads_it_alike() {
        let lines: &[&str] = &[
            r#"1.2.3.4 - frank [10/Oct/2000:13:55:36 -0700] "GET /a?x=1 HTTP/1.0" 200 2326"#,
            r#"h - - [10/Oct/2000:13:55:37 -0700] "HEAD / HTTP/1.1" 304 -"#,
            r#"h - - [10/Oct/2000:13:55:61 -0700] "GET / HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:55:3x -0700] "GET / HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET  /two-spaces HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET /a\"b HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "-" 408 0"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 099 1"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 12345678901234567890"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 trailing"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" "curl/8""#,
            r#"h - - [10/Oct/2000:13:56:02 -0700] "HEAD /x HTTP/1.1" 200 - "http://r/" "Mozilla/5.0 (X11)""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" "a \"quoted\" agent""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "http://r/\"x" "ua""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" "ua" extra"#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" ""#,
            r#"h - - [10/Oct/2000:13:56:02 -0701] "GET /zone HTTP/1.1" 200 1"#,
            r#"h - - [11/Oct/2000:13:56:02 -0701] "GET /day HTTP/1.1" 200 1"#,
            r#"h - - [11/Oct/2000:13:56:02 +0000xyz] "GET / HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:00 +0000xyz] "GET / HTTP/1.1" 200 1"#,
            r#"h - - [10/Oct/2000:13:56:01 +0000xyz] "GET / HTTP/1.1" 200 1"#,
            r#"h - - 10/Oct/2000:13:56:01 "GET / HTTP/1.1" 200 1"#,
            r#"h  - [10/Oct/2000:13:56:01 +0000] "GET / HTTP/1.1" 200 1"#,
        ];
        for (layout, text) in [(Layout::Common, COMMON), (Layout::Combined, COMBINED)] {
            let format = Format::parse(text).unwrap();
            let mut last_time = LastTime::default();
            let mut scanned = 0;
            for line in lines {
                let fast = scan(line.as_bytes(), layout, &mut last_time);
                if let Some(fields) = &fast {
                    scanned += 1;
                    assert_eq!(Some(fields), walked(&format, line.as_bytes()).as_ref(), "{layout:?} {line}");
                }
            }
            assert!(scanned >= 2, "{layout:?}: the scan took {scanned} lines");
        }
    }
}
