//! Log formats: a format string compiled into the walk that splits a line into its fields.

use super::clf::Layout;
use std::borrow::Cow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// Apache %t: "[10/Oct/2000:13:55:36 -0700]", brackets included.
    TimeBracketed,
    /// nginx $time_local: the same without brackets (they are literals of the format).
    Time,
    /// "GET /path HTTP/1.1"
    Request,
    Status,
    Bytes,
    Method,
    /// The path without the query (%U, $uri).
    Path,
    /// Path and query as requested ($request_uri).
    Target,
    /// The query (%q with its '?', $args without).
    Query,
    Ignore,
}

#[derive(Debug)]
enum Item {
    Lit(Vec<u8>),
    Field(Field),
}

/// Where a field's value ends.
#[derive(Debug)]
enum Until {
    /// Before the next occurrence of this literal (not at a `\"` when the field is quoted).
    Lit(Box<[u8]>),
    EndOfLine,
    /// Apache %t: at the ']' that closes its '['.
    Bracket,
}

/// One field and the literal text before it: the format compiled for the line walk.
#[derive(Debug)]
struct Step {
    before: Box<[u8]>,
    field: Field,
    until: Until,
    /// Its value opens with a quote, so an escaped quote inside is not its end.
    quoted: bool,
    /// A path directly followed by its query (%U%q): it ends at the '?'.
    query_next: bool,
}

#[derive(Debug)]
pub struct Format {
    steps: Vec<Step>,
    /// Literal text after the last field.
    after: Box<[u8]>,
    pub has_time: bool,
    /// Common or Combined, which have a scan of their own (clf.rs).
    pub layout: Option<Layout>,
}

pub const COMMON: &str = "%h %l %u %t \"%r\" %>s %b";
pub const COMBINED: &str = "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\"";

fn apache_field(directive: u8, has_braces: bool) -> Field {
    match directive {
        b't' if !has_braces => Field::TimeBracketed,
        b'r' => Field::Request,
        b's' => Field::Status,
        b'b' | b'B' => Field::Bytes,
        b'm' => Field::Method,
        b'U' => Field::Path,
        b'q' => Field::Query,
        _ => Field::Ignore,
    }
}

fn nginx_field(name: &str) -> Field {
    match name {
        "time_local" => Field::Time,
        "request" => Field::Request,
        "status" => Field::Status,
        "body_bytes_sent" => Field::Bytes,
        "request_method" => Field::Method,
        "uri" | "document_uri" => Field::Path,
        "request_uri" => Field::Target,
        "args" | "query_string" => Field::Query,
        _ => Field::Ignore,
    }
}

impl Format {
    /// "common", "combined", or a format string with Apache `%` directives or nginx `$variables`.
    pub fn parse(spec: &str) -> Result<Format, String> {
        let text = match spec {
            "common" | "clf" => COMMON,
            "combined" => COMBINED,
            other => other,
        };
        let b = text.as_bytes();
        let mut items: Vec<Item> = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        let push_field = |items: &mut Vec<Item>, lit: &mut Vec<u8>, f: Field| -> Result<(), String> {
            if !lit.is_empty() {
                items.push(Item::Lit(std::mem::take(lit)));
            } else if matches!(items.last(), Some(Item::Field(prev)) if !(*prev == Field::Path && f == Field::Query)) {
                // (%U%q is fine: the query starts at the '?')
                return Err(format!("format {text:?}: two fields with nothing between them cannot be told apart"));
            }
            items.push(Item::Field(f));
            Ok(())
        };
        while i < b.len() {
            match b[i] {
                b'%' if b.get(i + 1) == Some(&b'%') => {
                    lit.push(b'%');
                    i += 2;
                }
                b'%' => {
                    i += 1;
                    // Modifiers: < > ! and status lists, then an optional {argument}.
                    while i < b.len() && (b"<>!,".contains(&b[i]) || b[i].is_ascii_digit()) {
                        i += 1;
                    }
                    let mut braces = false;
                    if b.get(i) == Some(&b'{') {
                        braces = true;
                        match b[i..].iter().position(|&c| c == b'}') {
                            Some(close) => i += close + 1,
                            None => return Err(format!("format {text:?}: unclosed %{{")),
                        }
                    }
                    let Some(&d) = b.get(i) else { return Err(format!("format {text:?}: ends in the middle of a % directive")) };
                    if !d.is_ascii_alphabetic() {
                        return Err(format!("format {text:?}: unknown directive %{}", d as char));
                    }
                    push_field(&mut items, &mut lit, apache_field(d, braces))?;
                    i += 1;
                }
                b'$' if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'{') => {
                    i += 1;
                    let braced = b[i] == b'{';
                    if braced {
                        i += 1;
                    }
                    let start = i;
                    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                        i += 1;
                    }
                    let name = &text[start..i];
                    if braced {
                        if b.get(i) != Some(&b'}') {
                            return Err(format!("format {text:?}: unclosed ${{"));
                        }
                        i += 1;
                    }
                    push_field(&mut items, &mut lit, nginx_field(name))?;
                }
                c => {
                    lit.push(c);
                    i += 1;
                }
            }
        }
        if !lit.is_empty() {
            items.push(Item::Lit(lit));
        }
        let has = |f: Field| items.iter().any(|it| matches!(it, Item::Field(x) if *x == f));
        if !(has(Field::Request) || has(Field::Path) || has(Field::Target)) {
            return Err(format!("format {text:?}: no request line (%r, $request) or path (%U, $uri, $request_uri)"));
        }
        if !has(Field::Status) {
            return Err(format!("format {text:?}: no status (%>s, $status)"));
        }
        let has_time = has(Field::Time) || has(Field::TimeBracketed);
        let layout = match text {
            COMMON => Some(Layout::Common),
            COMBINED => Some(Layout::Combined),
            _ => None,
        };
        Ok(Format { layout, ..compile(&items, has_time) })
    }

    /// Split one line into its fields.
    pub fn parse_line<'a>(&self, line: &'a [u8]) -> Result<Entry<'a>, String> {
        let mut e = Entry::default();
        let mut p = 0;
        for step in &self.steps {
            p = expect(line, p, &step.before)?;
            let mut end = match &step.until {
                Until::Bracket => {
                    if line.get(p) != Some(&b'[') {
                        return Err(format!("column {}: expected '[' before the time", p + 1));
                    }
                    let Some(close) = memchr::memchr(b']', &line[p..]) else {
                        return Err(format!("column {}: no ']' after the time", p + 1));
                    };
                    e.decode(step.field, &line[p + 1..p + close])?;
                    p += close + 1;
                    continue;
                }
                Until::EndOfLine => line.len(),
                Until::Lit(next) => match find_delimiter(&line[p..], next, step.quoted) {
                    Some(i) => p + i,
                    None => return Err(format!("column {}: no {:?} after this field", p + 1, String::from_utf8_lossy(next))),
                },
            };
            if step.query_next {
                end = memchr::memchr(b'?', &line[p..end]).map_or(end, |q| p + q);
            }
            e.decode(step.field, &line[p..end])?;
            p = end;
        }
        p = expect(line, p, &self.after)?;
        if p != line.len() {
            return Err(format!("column {}: unexpected text after the last field", p + 1));
        }
        Ok(e)
    }
}

/// Pair each field with the literal before it and what ends it.
fn compile(items: &[Item], has_time: bool) -> Format {
    let mut steps = Vec::new();
    let mut before: &[u8] = b"";
    let mut last_lit: &[u8] = b"";
    for (k, item) in items.iter().enumerate() {
        match item {
            Item::Lit(l) => {
                before = l;
                last_lit = l;
            }
            Item::Field(field) => {
                let query_next = *field == Field::Path && matches!(items.get(k + 1), Some(Item::Field(Field::Query)));
                let until = match items.get(if query_next { k + 2 } else { k + 1 }) {
                    _ if *field == Field::TimeBracketed => Until::Bracket,
                    Some(Item::Lit(next)) => Until::Lit(next.clone().into()),
                    _ => Until::EndOfLine,
                };
                steps.push(Step { before: before.into(), field: *field, until, quoted: last_lit.last() == Some(&b'"'), query_next });
                before = b"";
            }
        }
    }
    Format { steps, after: before.into(), has_time, layout: None }
}

/// The position after `lit`, which must start at `p`.
#[inline]
fn expect(line: &[u8], p: usize, lit: &[u8]) -> Result<usize, String> {
    // Byte by byte: literals are a few bytes, too short for a memcmp call to pay.
    let fits = line.len() - p >= lit.len() && (0..lit.len()).all(|i| line[p + i] == lit[i]);
    if !fits {
        return Err(format!("column {}: expected {:?}", p + 1, String::from_utf8_lossy(lit)));
    }
    Ok(p + lit.len())
}

/// Where byte `b` first occurs in `s`.
#[inline]
fn find_byte(b: u8, s: &[u8]) -> Option<usize> {
    // Most fields are a few bytes long: eight bytes at a time finds their end before memchr has set up.
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut i = 0;
    // The high bit of each byte equal to b in the word at `at` (and maybe of bytes after it: the first is exact).
    let matches = |at: usize| {
        let w = u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes")) ^ (ONES * b as u64);
        w.wrapping_sub(ONES) & !w & (ONES << 7)
    };
    let first = |at: usize, m: u64| at + m.trailing_zeros() as usize / 8;
    while i < 32 && i + 8 <= s.len() {
        if let m @ 1.. = matches(i) {
            return Some(first(i, m));
        }
        i += 8;
    }
    if i < 32 && s.len() >= 8 {
        // A ragged end: the last word, overlapping bytes already searched (none of them b).
        let at = s.len() - 8;
        return Some(matches(at)).filter(|&m| m != 0).map(|m| first(at, m));
    }
    memchr::memchr(b, &s[i..]).map(|j| i + j)
}

/// Where `delim` starts in `s`; inside quotes a quote escaped with a backslash is not the end.
fn find_delimiter(s: &[u8], delim: &[u8], quoted: bool) -> Option<usize> {
    let (&first, rest) = delim.split_first()?;
    let mut from = 0;
    loop {
        let i = from + find_byte(first, &s[from..])?;
        let escaped = quoted && first == b'"' && i > 0 && s[i - 1] == b'\\';
        if !escaped && s.len() - i > rest.len() && (0..rest.len()).all(|k| s[i + 1 + k] == rest[k]) {
            return Some(i);
        }
        from = i + 1;
    }
}

#[inline]
pub(super) fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    b.iter().try_fold(0u64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as u64))
}

/// "10/Oct/2000:13:55:36 -0700" to seconds since the epoch (UTC).
pub fn parse_time(b: &[u8]) -> Option<i64> {
    if b.len() < 20 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[14] != b':' || b[17] != b':' {
        return None;
    }
    let digit = |i: usize| {
        let d = b[i].wrapping_sub(b'0');
        (d < 10).then_some(d as i64)
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let day = two(0)?;
    let month = match &[b[3], b[4], b[5]] {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return None,
    };
    let (year, hour, min, sec) = (two(7)? * 100 + two(9)?, two(12)?, two(15)?, two(18)?);
    let mut offset = 0;
    if b.len() >= 26 && b[20] == b' ' {
        let sign = match b[21] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        offset = sign * (two(22)? * 3600 + two(24)? * 60);
    }
    if !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + min * 60 + sec - offset)
}

/// What replay takes from a line.
#[derive(Debug, PartialEq)]
pub struct Fields<'a> {
    /// Seconds since the epoch (0 when the format has no time).
    pub time: i64,
    pub method: &'a [u8],
    /// The request target as sent: path and query.
    pub target: Cow<'a, [u8]>,
    /// 0 when the format has none.
    pub status: u16,
    pub bytes: u64,
}

/// The fields of one line as the format names them.
#[derive(Default, Debug)]
pub struct Entry<'a> {
    pub time: Option<i64>,
    pub request: Option<&'a [u8]>,
    pub status: Option<u16>,
    pub bytes: u64,
    pub method: Option<&'a [u8]>,
    pub path: Option<&'a [u8]>,
    pub target: Option<&'a [u8]>,
    pub query: Option<&'a [u8]>,
}

impl<'a> Entry<'a> {
    #[inline]
    fn decode(&mut self, field: Field, value: &'a [u8]) -> Result<(), String> {
        match field {
            Field::TimeBracketed | Field::Time => self.time = Some(parse_time(value).ok_or_else(|| format!("bad time {:?}", String::from_utf8_lossy(value)))?),
            Field::Request => self.request = Some(value),
            Field::Status => {
                self.status =
                    Some(parse_u64(value).filter(|s| (100..1000).contains(s)).ok_or_else(|| format!("bad status {:?}", String::from_utf8_lossy(value)))? as u16)
            }
            Field::Bytes => {
                self.bytes = if value == b"-" { 0 } else { parse_u64(value).ok_or_else(|| format!("bad byte count {:?}", String::from_utf8_lossy(value)))? }
            }
            Field::Method => self.method = Some(value),
            Field::Path => self.path = Some(value),
            Field::Target => self.target = Some(value),
            Field::Query => self.query = Some(value),
            Field::Ignore => {}
        }
        Ok(())
    }

    pub fn fields(&self) -> Result<Fields<'a>, String> {
        let (method, target) = self.method_and_target()?;
        Ok(Fields { time: self.time.unwrap_or(0), method, target, status: self.status.unwrap_or(0), bytes: self.bytes })
    }

    /// (method, request target as sent: path and query).
    fn method_and_target(&self) -> Result<(&'a [u8], Cow<'a, [u8]>), String> {
        if let Some(r) = self.request {
            let mut parts = r.split(|&c| c == b' ').filter(|p| !p.is_empty());
            let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
                return Err(format!("no request line in {:?}", String::from_utf8_lossy(r)));
            };
            return Ok((method, Cow::Borrowed(target)));
        }
        let method = self.method.unwrap_or(b"GET");
        if let Some(t) = self.target {
            return Ok((method, Cow::Borrowed(t)));
        }
        let path = self.path.unwrap_or(b"");
        match self.query.filter(|q| !q.is_empty() && *q != b"-") {
            None => Ok((method, Cow::Borrowed(path))),
            Some(q) => {
                let mut t = path.to_vec();
                if q[0] != b'?' {
                    t.push(b'?');
                }
                t.extend_from_slice(q);
                Ok((method, Cow::Owned(t)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_and_combined_lines_parse() {
        let f = Format::parse("combined").unwrap();
        let line = br#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?x=1 HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;
        let e = f.parse_line(line).unwrap();
        assert_eq!(e.status, Some(200));
        assert_eq!(e.bytes, 2326);
        assert_eq!(e.time, Some(971_211_336));
        assert_eq!(e.method_and_target().unwrap(), (&b"GET"[..], Cow::from(&b"/apache_pb.gif?x=1"[..])));
        let c = Format::parse("common").unwrap();
        let e = c.parse_line(br#"h - - [01/Jan/1970:00:00:01 +0000] "HEAD / HTTP/1.1" 304 -"#).unwrap();
        assert_eq!((e.status, e.bytes, e.time), (Some(304), 0, Some(1)));
        // A quote escaped inside the request line does not end it.
        let e = f.parse_line(br#"h - - [01/Jan/2001:00:00:00 +0000] "GET /a\"b HTTP/1.1" 200 5 "-" "x""#).unwrap();
        assert_eq!(e.request, Some(&br#"GET /a\"b HTTP/1.1"#[..]));
    }

    #[test]
    fn bad_lines_say_where() {
        let f = Format::parse("common").unwrap();
        let err = f.parse_line(br#"h - - 10/Oct/2000:13:55:36 -0700 "GET / HTTP/1.0" 200 1"#).unwrap_err();
        assert!(err.contains("column 7") && err.contains('['), "{err}");
        let err = f.parse_line(br#"h - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 2x0 1"#).unwrap_err();
        assert!(err.contains("bad status"), "{err}");
        let err = f.parse_line(br#"h - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1 extra"#).unwrap_err();
        assert!(err.contains("bad byte count") || err.contains("after the last field"), "{err}");
    }

    #[test]
    fn nginx_and_apache_format_strings() {
        let n = Format::parse(r#"$remote_addr [$time_local] "$request_method $request_uri" $status $body_bytes_sent $request_time"#).unwrap();
        let e = n.parse_line(br#"::1 [22/Nov/2026:15:21:51 +0000] "GET /a/b?c" 200 17 0.001"#).unwrap();
        assert_eq!(e.method_and_target().unwrap(), (&b"GET"[..], Cow::from(&b"/a/b?c"[..])));
        assert_eq!(e.bytes, 17);
        let a = Format::parse("%a %>s %B %U%q %D").unwrap();
        let e = a.parse_line(b"1.2.3.4 206 99 /x?y=1 1234").unwrap();
        assert_eq!(e.method_and_target().unwrap().1.as_ref(), b"/x?y=1");
        assert!(Format::parse("%h %t").unwrap_err().contains("no request"));
        assert!(Format::parse("%r%>s").unwrap_err().contains("nothing between"));
    }

    #[test]
    fn times_convert_with_their_zone() {
        assert_eq!(parse_time(b"01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(parse_time(b"01/Jan/1970:01:00:00 +0100"), Some(0));
        assert_eq!(parse_time(b"29/Feb/2000:12:00:00 +0000"), Some(951_825_600));
        assert_eq!(parse_time(b"31/Foo/2000:12:00:00 +0000"), None);
    }

    #[test]
    fn byte_search_finds_the_first_at_any_position() {
        for len in 0..48 {
            let plain = vec![b'x'; len];
            assert_eq!(find_byte(b' ', &plain), None, "{len}");
            for at in 0..len {
                let mut s = plain.clone();
                s[at] = b' ';
                // A later match and the byte one above the wanted one must not confuse it.
                for (k, c) in [(1, b' ' ^ 1), (3, b' ')] {
                    if at + k < len {
                        s[at + k] = c;
                    }
                }
                assert_eq!(find_byte(b' ', &s), Some(at), "{len} {at}");
            }
        }
    }
}
