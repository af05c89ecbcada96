//! Common and Combined Log Format lines scanned straight to the fields replay uses.
//! Most logs are in one of these two layouts, and the format-string walk spends most of
//! its time on fields replay ignores. The scan accepts only lines the walk would accept,
//! with the same fields; any line it is unsure of (a malformed one, an escaped quote in
//! the user agent) it leaves to the walk, which also words the error.

use super::format::{parse_time, parse_u64, Fields};
use super::structure::{Index, Line, QUOTES};
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

/// The fields of `line` (of `block`, indexed by `index`) in `layout`, or None where the
/// format-string walk must decide. The quotes found while indexing give the quoted
/// fields; a line with more or fewer than its layout has (an escaped quote inside a
/// field) goes the long way.
#[inline]
pub fn scan<'a>(block: &'a [u8], index: &Index, line: &Line, layout: Layout, last_time: &mut LastTime) -> Option<Fields<'a>> {
    let (b, end, q) = (block, line.end, &line.quotes);
    let quotes = match layout {
        Layout::Common => 2,
        Layout::Combined => QUOTES,
    };
    if line.quote_count != quotes {
        return None;
    }
    // %h %l %u: each ends at the next space.
    let p = index.nth_space(line.start, end, 3)? + 1;
    // [%t]
    if p + 1 >= end || b[p] != b'[' {
        return None;
    }
    // The usual "dd/Mon/yyyy:HH:MM:SS +zone": parse_time checks each of its 26 bytes, so
    // if it parses, the ']' after it is the first.
    let close = match p + 27 < end && b[p + 27] == b']' && b[p + 21] == b' ' {
        true => p + 27,
        false => p + memchr::memchr(b']', &b[p..end])?,
    };
    let time = last_time.parse(&b[p + 1..close])?;
    // "%r": from the first quote to the second, which must not be escaped and must be
    // followed by a space; method and target are its first two words (single spaces:
    // others go the long way).
    let (request, request_end) = (q[0] + 1, q[1]);
    if q[0] != close + 2 || b[close + 1] != b' ' || request_end + 1 >= end || b[request_end + 1] != b' ' || b[request_end - 1] == b'\\' {
        return None;
    }
    let method_end = index.space(request, request_end).filter(|&i| i > request)?;
    let target_end = index.space(method_end + 1, request_end).unwrap_or(request_end);
    if target_end == method_end + 1 {
        return None;
    }
    // %>s: three digits and a space.
    if request_end + 6 > end {
        return None;
    }
    let status = &b[request_end + 2..request_end + 6];
    if status[3] != b' ' {
        return None;
    }
    let status = parse_u64(&status[..3]).filter(|s| (100..1000).contains(s))? as u16;
    // %b: digits (at most 19, as the walk takes) or "-", up to the line's end (Common)
    // or to ` "` (Combined).
    let bytes_at = request_end + 6;
    let bytes_end = match layout {
        Layout::Common => end,
        Layout::Combined => q[2] - 1,
    };
    let bytes = match b.get(bytes_at..bytes_end.max(bytes_at))? {
        b"-" => 0,
        digits => parse_u64(digits)?,
    };
    if layout == Layout::Combined {
        // "%{Referer}i": up to the next quote, which must not be escaped and must be
        // followed by ` "`; "%{User-agent}i": its only quote is the line's last byte.
        let escaped = |quote: usize| b[quote - 1] == b'\\';
        if b[bytes_end] != b' ' || escaped(q[3]) || q[4] != q[3] + 2 || b[q[3] + 1] != b' ' || q[5] != end - 1 || escaped(q[5]) {
            return None;
        }
    }
    Some(Fields { time, method: &b[request..method_end], target: Cow::Borrowed(&b[method_end + 1..target_end]), status, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::format::{Format, COMBINED, COMMON};

    /// The walk's fields of `line`, for comparison.
    fn walked<'a>(format: &Format, line: &'a [u8]) -> Option<Fields<'a>> {
        format.parse_line(line).and_then(|e| e.fields()).ok()
    }

    /// The scan of a block of one line.
    fn scan_line<'a>(line: &'a [u8], layout: Layout, last_time: &mut LastTime) -> Option<Fields<'a>> {
        let mut index = Index::default();
        index.build(line);
        let indexed = index.lines().next(line).expect("one line");
        scan(line, &index, &indexed, layout, last_time)
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
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" "ua\""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1\" 200 1 "-" "ua""#,
            r#"h - - [10/Oct/2000:13:56:00 -0700] "GET /a HTTP/1.1" 200 1 "-" "a much longer user agent, Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)""#,
            r#"a-host-name-of-some-length.example.org an-ident a-user-name-that-takes-up-more-than-sixty-four-bytes-by-itself [10/Oct/2000:13:56:00 -0700] "GET /a/target/longer/than/sixty/four/bytes/so/that/its/end/is/in/the/next/window.html?with=a&query=string HTTP/1.1" 200 1 "-" "ua""#,
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
            let mut scanned = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                let fast = scan_line(line.as_bytes(), layout, &mut last_time);
                if let Some(fields) = &fast {
                    scanned.push(i);
                    assert_eq!(Some(fields), walked(&format, line.as_bytes()).as_ref(), "{layout:?} {line}");
                }
            }
            // What the scan leaves to the walk costs time, not correctness: these are the
            // lines it must take (the well-formed ones, whatever their fields' lengths).
            let taken: &[usize] = match layout {
                Layout::Common => &[0, 1, 22, 23, 24, 25, 26, 28],
                Layout::Combined => &[11, 12, 18, 19],
            };
            assert_eq!(scanned, taken, "{layout:?}");
        }
    }

    #[test]
    fn lines_mutated_at_random_are_scanned_as_the_walk_reads_them_or_left_to_it() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let seeds = [
            r#"10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a/b.html?x=1 HTTP/1.1" 200 2326 "http://r/x" "Mozilla/5.0 (X11; Linux x86_64)""#,
            r#"h - - [10/Oct/2000:13:55:36 +0000] "HEAD /f HTTP/1.0" 304 - "-" "curl/8""#,
        ];
        let alphabet = b"\" \\[]-0123456789/:aZ\r";
        let mut taken = [0; 2];
        for round in 0..40_000 {
            let mut line = seeds[round % 2].as_bytes().to_vec();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..line.len());
                match rng.random_range(0..3) {
                    0 => line[at] = alphabet[rng.random_range(0..alphabet.len())],
                    1 => {
                        line.remove(at);
                    }
                    _ => line.insert(at, alphabet[rng.random_range(0..alphabet.len())]),
                }
            }
            let common_part = line.iter().position(|&c| c == b'"').and_then(|q| line[q + 1..].iter().position(|&c| c == b'"').map(|r| q + r + 1));
            for (layout, text, line) in
                [(Layout::Combined, COMBINED, &line[..]), (Layout::Common, COMMON, &line[..line.len().min(common_part.map_or(line.len(), |end| end + 9))])]
            {
                // A block's lines come without their line ends, to the scan and to the walk alike.
                let mut line = line;
                while let [rest @ .., b'\r'] = line {
                    line = rest;
                }
                let format = Format::parse(text).unwrap();
                if let Some(fields) = scan_line(line, layout, &mut LastTime::default()) {
                    taken[(layout == Layout::Common) as usize] += 1;
                    assert_eq!(Some(&fields), walked(&format, line).as_ref(), "{layout:?} {:?}", String::from_utf8_lossy(line));
                }
            }
        }
        // Some mutations leave a line well formed (a digit for a digit, a letter in the agent).
        assert!(taken.iter().all(|&n| n > 1_000), "taken: {taken:?}");
    }

    #[test]
    #[ignore = "a fuzz target: scripts/fuzz.sh runs it"]
    fn fuzz_access_log_line() {
        let seeds: &[&[u8]] = &[
            br#"1.2.3.4 - frank [10/Oct/2000:13:55:36 -0700] "GET /a/b.html?x=1 HTTP/1.0" 200 2326"#,
            br#"h - - [10/Oct/2000:13:56:02 -0700] "HEAD /x%20y/ HTTP/1.1" 304 - "http://r/" "Mozilla/5.0 (X11)""#,
            br#"h - - [10/Oct/2000:13:56:00 -0700] "GET / HTTP/1.1" 200 1 "-" "a \"quoted\" agent""#,
            b"$remote_addr [$time_local] \"$request\" $status $body_bytes_sent",
            b"%h %l %u %t \"%r\" %>s %b %D",
        ];
        let layouts = [(Layout::Common, Format::parse(COMMON).unwrap()), (Layout::Combined, Format::parse(COMBINED).unwrap())];
        crate::fuzz::fuzz("access log line", seeds, |input| {
            // The input as a block of a log, lines found as the parser finds them, in both
            // layouts: the scan checked against the walk.
            let mut index = Index::default();
            index.build(input);
            for (layout, format) in &layouts {
                let (mut lines, mut last_time) = (index.lines(), LastTime::default());
                while let Some(line) = lines.next(input) {
                    let walk = walked(format, &input[line.start..line.end]);
                    if let Some(fields) = &walk {
                        crate::replay::file_of(&fields.target);
                    }
                    if let Some(fast) = scan(input, &index, &line, *layout, &mut last_time) {
                        assert_eq!(Some(&fast), walk.as_ref(), "{layout:?}");
                    }
                }
            }
            // The input as a format string: it compiles or is refused, and what compiles reads a line.
            if let Ok(format) = Format::parse(&String::from_utf8_lossy(input)) {
                walked(&format, seeds[0]);
                walked(&format, input);
            }
        });
    }
}
