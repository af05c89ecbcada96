//! Access-log replay: a web server's log as the request stream (SPEC.md, "Replay").
//!
//! The log is read once, before the trial, into a compact trace: distinct request
//! targets and files (interned), and per request its target, method and time.
//! Common and Combined Log Formats are built in; any other layout is given as an
//! Apache (`%h %l %u %t "%r" %>s %b`) or nginx (`$remote_addr ... "$request" $status`)
//! format string. gzip input is recognised by its magic bytes. A line that does not
//! parse is never replayed silently: it is counted, and the first few are quoted with
//! their line number and what was wrong.

use crate::spec::ReplaySpec;
use crate::target::{Request, WHOLE};
use crate::workload::mix::Op;
use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufRead, BufReader, Read};

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
    /// A literal and a searcher for it (built once: a searcher per call costs more than the search).
    Lit(Vec<u8>, memchr::memmem::Finder<'static>),
    Field(Field),
}

fn lit(bytes: Vec<u8>) -> Item {
    let finder = memchr::memmem::Finder::new(&bytes).into_owned();
    Item::Lit(bytes, finder)
}

#[derive(Debug)]
pub struct Format {
    items: Vec<Item>,
    pub has_time: bool,
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
                items.push(self::lit(std::mem::take(lit)));
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
            items.push(self::lit(lit));
        }
        let has = |f: Field| items.iter().any(|it| matches!(it, Item::Field(x) if *x == f));
        if !(has(Field::Request) || has(Field::Path) || has(Field::Target)) {
            return Err(format!("format {text:?}: no request line (%r, $request) or path (%U, $uri, $request_uri)"));
        }
        if !has(Field::Status) {
            return Err(format!("format {text:?}: no status (%>s, $status)"));
        }
        let has_time = has(Field::Time) || has(Field::TimeBracketed);
        Ok(Format { items, has_time })
    }

    /// Split one line into its fields.
    pub fn parse_line<'a>(&self, line: &'a [u8]) -> Result<Entry<'a>, String> {
        let mut e = Entry::default();
        let mut p = 0;
        let mut quoted = false;
        for (k, item) in self.items.iter().enumerate() {
            match item {
                Item::Lit(l, _) => {
                    let rest = &line[p..];
                    // Byte by byte: literals are a few bytes, too short for a memcmp call to pay.
                    if rest.len() < l.len() || rest.iter().zip(l.iter()).any(|(a, b)| a != b) {
                        return Err(format!("column {}: expected {:?}", p + 1, String::from_utf8_lossy(l)));
                    }
                    p += l.len();
                    quoted = l.last() == Some(&b'"');
                }
                Item::Field(f) => {
                    let value;
                    if *f == Field::TimeBracketed {
                        if line.get(p) != Some(&b'[') {
                            return Err(format!("column {}: expected '[' before the time", p + 1));
                        }
                        let Some(close) = line[p..].iter().position(|&c| c == b']') else {
                            return Err(format!("column {}: no ']' after the time", p + 1));
                        };
                        value = &line[p + 1..p + close];
                        p += close + 1;
                    } else {
                        // A path directly followed by its query (%U%q) ends at the '?'.
                        let query_next = *f == Field::Path && matches!(self.items.get(k + 1), Some(Item::Field(Field::Query)));
                        let delimiter_at = if query_next { k + 2 } else { k + 1 };
                        let mut end = match self.items.get(delimiter_at) {
                            Some(Item::Lit(next, finder)) => find_delimiter(&line[p..], next, finder, quoted).map(|i| p + i),
                            _ => Some(line.len()),
                        };
                        if let (true, Some(e)) = (query_next, end) {
                            end = Some(line[p..e].iter().position(|&c| c == b'?').map_or(e, |q| p + q));
                        }
                        let Some(end) = end else {
                            let next = match self.items.get(delimiter_at) {
                                Some(Item::Lit(n, _)) => String::from_utf8_lossy(n).into_owned(),
                                _ => String::new(),
                            };
                            return Err(format!("column {}: no {next:?} after this field", p + 1));
                        };
                        value = &line[p..end];
                        p = end;
                    }
                    match f {
                        Field::TimeBracketed | Field::Time => {
                            e.time = Some(parse_time(value).ok_or_else(|| format!("bad time {:?}", String::from_utf8_lossy(value)))?)
                        }
                        Field::Request => e.request = Some(value),
                        Field::Status => {
                            e.status = Some(parse_u64(value).filter(|s| (100..1000).contains(s)).ok_or_else(|| format!("bad status {:?}", String::from_utf8_lossy(value)))? as u16)
                        }
                        Field::Bytes => e.bytes = if value == b"-" { 0 } else { parse_u64(value).ok_or_else(|| format!("bad byte count {:?}", String::from_utf8_lossy(value)))? },
                        Field::Method => e.method = Some(value),
                        Field::Path => e.path = Some(value),
                        Field::Target => e.target = Some(value),
                        Field::Query => e.query = Some(value),
                        Field::Ignore => {}
                    }
                }
            }
        }
        if p != line.len() {
            return Err(format!("column {}: unexpected text after the last field", p + 1));
        }
        Ok(e)
    }
}

/// Where `delim` starts in `s`; inside quotes a quote escaped with a backslash is not the end.
fn find_delimiter(s: &[u8], delim: &[u8], finder: &memchr::memmem::Finder, quoted: bool) -> Option<usize> {
    let mut from = 0;
    loop {
        let i = from + if delim.len() == 1 { memchr::memchr(delim[0], &s[from..])? } else { finder.find(&s[from..])? };
        if quoted && delim[0] == b'"' && i > 0 && s[i - 1] == b'\\' {
            from = i + 1;
            continue;
        }
        return Some(i);
    }
}

fn parse_u64(b: &[u8]) -> Option<u64> {
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
    let num = |r: std::ops::Range<usize>| parse_u64(&b[r]).map(|v| v as i64);
    let day = num(0..2)?;
    const MONTHS: [&[u8; 3]; 12] = [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    let month = MONTHS.iter().position(|m| &b[3..6] == *m)? as i64 + 1;
    let (year, hour, min, sec) = (num(7..11)?, num(12..14)?, num(15..17)?, num(18..20)?);
    let mut offset = 0;
    if b.len() >= 26 && b[20] == b' ' {
        let sign = match b[21] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        offset = sign * (num(22..24)? * 3600 + num(24..26)? * 60);
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

/// The fields of one line that replay uses.
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

/// The file a request target names, relative to the document root: query dropped,
/// %XX decoded, "dir/" served as "dir/index.html". None for targets that could leave
/// the root ("..") or are not paths at all.
pub fn file_of(target: &[u8]) -> Option<String> {
    let path = &target[..target.iter().position(|&c| c == b'?' || c == b'#').unwrap_or(target.len())];
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut decoded = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' && i + 2 < path.len() {
            let hex = std::str::from_utf8(&path[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(0) | None => return None,
                Some(v) => decoded.push(v),
            }
            i += 3;
        } else {
            decoded.push(path[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(decoded).ok()?;
    let mut parts: Vec<&str> = Vec::new();
    for seg in text.split('/') {
        match seg {
            "" => {}
            "." | ".." => return None,
            s => parts.push(s),
        }
    }
    if text.ends_with('/') {
        parts.push("index.html");
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// FxHash: interning millions of paths is the parser's hot spot, and SipHash's DoS
/// resistance buys nothing for a log we read ourselves.
#[derive(Default)]
struct Fx(u64);
impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x51_7cc1_b727_220a_95);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Why lines were not replayed.
#[derive(Default, Debug)]
pub struct Skipped {
    pub unparseable: u64,
    pub method: u64,
    pub status: u64,
    pub path: u64,
    pub blank: u64,
    /// (line number, what was wrong, the line) for the first unparseable lines.
    pub examples: Vec<(u64, String, String)>,
}

pub struct Trace {
    /// Distinct request targets as sent over HTTP (path and query), without the leading '/'.
    pub targets: Vec<String>,
    pub target_file: Vec<u32>,
    /// Distinct files (relative to the document root) and the size each was served at
    /// (its largest 200 response; 0 if none was a 200).
    pub files: Vec<String>,
    pub file_sizes: Vec<u64>,
    /// Per request: target index << 1 | 1 for HEAD.
    pub requests: Vec<u32>,
    /// Per request: seconds since the epoch (0 when the format has no time).
    pub times: Vec<i64>,
    pub lines: u64,
    pub skipped: Skipped,
    /// Seconds spent reading and parsing the log.
    pub parse_s: f64,
}

fn open_log(path: &str) -> anyhow::Result<Box<dyn BufRead>> {
    let mut file = std::fs::File::open(path).with_context(|| format!("access log {path}"))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).with_context(|| format!("access log {path}"))?;
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, head))))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, head))
    })
}

impl Trace {
    pub fn load(spec: &ReplaySpec) -> anyhow::Result<Trace> {
        let started = std::time::Instant::now();
        let format = Format::parse(&spec.format).map_err(anyhow::Error::msg)?;
        let mut reader = open_log(&spec.log)?;
        let mut t = Trace {
            targets: Vec::new(),
            target_file: Vec::new(),
            files: Vec::new(),
            file_sizes: Vec::new(),
            requests: Vec::new(),
            times: Vec::new(),
            lines: 0,
            skipped: Skipped::default(),
            parse_s: 0.0,
        };
        let mut target_ids: FxMap<Vec<u8>, u32> = FxMap::default();
        let mut file_ids: FxMap<String, u32> = FxMap::default();
        let mut line = Vec::with_capacity(4096);
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).with_context(|| format!("access log {}: after line {}", spec.log, t.lines))?;
            if n == 0 {
                break;
            }
            t.lines += 1;
            let mut text: &[u8] = &line;
            while let Some((&last, rest)) = text.split_last() {
                if last == b'\n' || last == b'\r' {
                    text = rest;
                } else {
                    break;
                }
            }
            if text.iter().all(|c| c.is_ascii_whitespace()) {
                t.skipped.blank += 1;
                continue;
            }
            let entry = match format.parse_line(text) {
                Ok(e) => e,
                Err(why) => {
                    t.unparseable(spec, why, text);
                    continue;
                }
            };
            let (method, target) = match entry.method_and_target() {
                Ok(x) => x,
                Err(why) => {
                    t.unparseable(spec, why, text);
                    continue;
                }
            };
            let head = match method {
                b"GET" => false,
                b"HEAD" => true,
                _ => {
                    t.skipped.method += 1;
                    continue;
                }
            };
            let status = entry.status.unwrap_or(0);
            let success = (200..300).contains(&status) || status == 304;
            if !success && !spec.all_statuses {
                t.skipped.status += 1;
                continue;
            }
            // An absolute-form target (a proxy's log): keep the path.
            let mut target: &[u8] = &target;
            if target.starts_with(b"http://") || target.starts_with(b"https://") {
                target = match target.iter().skip(8).position(|&c| c == b'/') {
                    Some(i) => &target[i + 8..],
                    None => b"/",
                };
            }
            let id = match target_ids.get(target) {
                Some(&id) => id,
                None => {
                    let Some(file) = file_of(target) else {
                        t.skipped.path += 1;
                        continue;
                    };
                    let Ok(sent) = String::from_utf8(target[1..].to_vec()) else {
                        t.skipped.path += 1;
                        continue;
                    };
                    let fid = *file_ids.entry(file).or_insert_with_key(|f| {
                        t.files.push(f.clone());
                        t.file_sizes.push(0);
                        (t.files.len() - 1) as u32
                    });
                    let id = t.targets.len() as u32;
                    if id >= u32::MAX >> 1 {
                        bail!("access log {}: more than 2 billion distinct paths", spec.log);
                    }
                    t.targets.push(sent);
                    t.target_file.push(fid);
                    target_ids.insert(target.to_vec(), id);
                    id
                }
            };
            if status == 200 && !head {
                let f = t.target_file[id as usize] as usize;
                t.file_sizes[f] = t.file_sizes[f].max(entry.bytes);
            }
            t.requests.push(id << 1 | head as u32);
            t.times.push(entry.time.unwrap_or(0));
        }
        t.parse_s = started.elapsed().as_secs_f64();
        if t.requests.is_empty() {
            let first = match t.skipped.examples.first() {
                Some((line, why, _)) => format!("; line {line}: {why}"),
                None => String::new(),
            };
            bail!("access log {}: nothing to replay in {} lines ({}){first}", spec.log, t.lines, t.skipped_text());
        }
        Ok(t)
    }

    fn unparseable(&mut self, spec: &ReplaySpec, why: String, text: &[u8]) {
        self.skipped.unparseable += 1;
        if self.skipped.examples.len() < spec.examples {
            let mut shown = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
            if text.len() > 200 {
                shown.push('…');
            }
            self.skipped.examples.push((self.lines, why, shown));
        }
    }

    fn skipped_text(&self) -> String {
        let s = &self.skipped;
        format!("{} unparseable, {} not GET or HEAD, {} unsuccessful, {} bad paths, {} blank", s.unparseable, s.method, s.status, s.path, s.blank)
    }

    fn file(&self, request: u32) -> usize {
        self.target_file[(request >> 1) as usize] as usize
    }

    /// The longest prefix whose distinct files total at most `limit` bytes:
    /// (requests in it, its distinct files, their bytes).
    pub fn prefix(&self, limit: Option<u64>) -> (usize, u64, u64) {
        let mut seen = vec![false; self.files.len()];
        let (mut files, mut bytes) = (0u64, 0u64);
        for (i, &r) in self.requests.iter().enumerate() {
            let f = self.file(r);
            if !seen[f] {
                let size = self.file_sizes[f];
                if limit.is_some_and(|l| bytes + size > l) {
                    return (i, files, bytes);
                }
                seen[f] = true;
                files += 1;
                bytes += size;
            }
        }
        (self.requests.len(), files, bytes)
    }

    /// The distinct files of the first `len` requests, in first-use order.
    pub fn files_used(&self, len: usize) -> Vec<usize> {
        let mut seen = vec![false; self.files.len()];
        let mut out = Vec::new();
        for &r in &self.requests[..len] {
            let f = self.file(r);
            if !std::mem::replace(&mut seen[f], true) {
                out.push(f);
            }
        }
        out
    }

    /// Send times of the first `len` requests at the log's pace (ns from the first), and
    /// the period after which a looped replay starts again. Requests logged in the same
    /// second are spread evenly across it (the log's clock has one-second resolution);
    /// a time earlier than its predecessor's (logs are written at completion) is taken
    /// as its predecessor's.
    pub fn offsets_ns(&self, len: usize) -> (Vec<u64>, u64) {
        let times = &self.times[..len];
        let t0 = times[0];
        let mut secs: Vec<i64> = Vec::with_capacity(len);
        let mut latest = t0;
        for &t in times {
            latest = latest.max(t);
            secs.push(latest - t0);
        }
        let mut out = Vec::with_capacity(len);
        let mut i = 0;
        while i < len {
            let mut j = i;
            while j < len && secs[j] == secs[i] {
                j += 1;
            }
            let k = (j - i) as u64;
            for n in 0..k {
                out.push(secs[i] as u64 * 1_000_000_000 + n * 1_000_000_000 / k);
            }
            i = j;
        }
        let period = (*secs.last().unwrap() as u64 + 1) * 1_000_000_000;
        (out, period)
    }

    pub fn summary(&self, spec: &ReplaySpec, len: usize, files: u64, bytes: u64) -> Value {
        let s = &self.skipped;
        let (_, all_files, all_bytes) = self.prefix(None);
        let span = if len > 0 { self.times[..len].iter().max().unwrap() - self.times[0] } else { 0 };
        json!({
            "log": spec.log,
            "format": spec.format,
            "lines": self.lines,
            "replayable": self.requests.len(),
            "skipped": {"unparseable": s.unparseable, "method": s.method, "status": s.status, "path": s.path, "blank": s.blank},
            "first_unparseable": s.examples.iter().map(|(line, why, text)| json!({"line": line, "error": why, "text": text})).collect::<Vec<_>>(),
            "requests": len,
            "files": files,
            "dataset_bytes": bytes,
            "log_files": all_files,
            "log_dataset_bytes": all_bytes,
            "truncated": len < self.requests.len(),
            "span_s": span,
            "parse_s": self.parse_s,
        })
    }
}

/// Size classes of the per-class latency breakdown (by the size the log served).
pub const SIZE_CLASSES: [(u64, &str); 5] = [(1 << 10, "<1KiB"), (10 << 10, "1-10KiB"), (100 << 10, "10-100KiB"), (1 << 20, "100KiB-1MiB"), (u64::MAX, ">=1MiB")];

pub fn size_class(bytes: u64) -> u8 {
    SIZE_CLASSES.iter().position(|(limit, _)| bytes < *limit).unwrap_or(SIZE_CLASSES.len() - 1) as u8
}

/// The request source of a replay: the trace's first `len` requests, looped or once.
pub struct ReplayStream {
    pub trace: Trace,
    len: usize,
    looping: bool,
    /// HTTP targets get the request target as logged; file systems the decoded file path.
    http: bool,
    pub issued: u64,
}

impl ReplayStream {
    pub fn new(trace: Trace, len: usize, looping: bool, http: bool) -> ReplayStream {
        ReplayStream { trace, len, looping, http, issued: 0 }
    }

    /// The next request and its size class; None when a replay without loop is done.
    pub fn next(&mut self) -> Option<(Op, Request, Option<u32>, u8)> {
        if !self.looping && self.issued >= self.len as u64 {
            return None;
        }
        let r = self.trace.requests[(self.issued % self.len as u64) as usize];
        self.issued += 1;
        let target = r >> 1;
        let file = self.trace.target_file[target as usize] as usize;
        let path = if self.http { self.trace.targets[target as usize].clone() } else { self.trace.files[file].clone() };
        let class = size_class(self.trace.file_sizes[file]);
        Some(if r & 1 == 1 {
            (Op::Getattr, Request::Getattr { path }, Some(target), class)
        } else {
            (Op::Read, Request::Read { path, offset: 0, len: WHOLE, xfer: 64 << 10 }, Some(target), class)
        })
    }
}

/// Per-class records of a replay: (op, size class, error kind or None for success).
pub type ClassKey = (Op, u8, Option<String>);

pub fn class_label(key: &ClassKey) -> String {
    let method = if key.0 == Op::Getattr { "HEAD" } else { "GET" };
    format!("{method} {} {}", SIZE_CLASSES[key.1 as usize].1, key.2.as_deref().unwrap_or("ok"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(log: &str, format: &str) -> ReplaySpec {
        serde_json::from_value(json!({"log": log, "format": format})).unwrap()
    }

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
    fn targets_map_to_files_inside_the_root() {
        assert_eq!(file_of(b"/a/b.html?x=1").as_deref(), Some("a/b.html"));
        assert_eq!(file_of(b"/").as_deref(), Some("index.html"));
        assert_eq!(file_of(b"/docs/").as_deref(), Some("docs/index.html"));
        assert_eq!(file_of(b"/a%20b//c").as_deref(), Some("a b/c"));
        assert_eq!(file_of(b"/../etc/passwd"), None);
        assert_eq!(file_of(b"/a/%2e%2e/b"), None);
        assert_eq!(file_of(b"/a%00"), None);
        assert_eq!(file_of(b"*"), None);
    }

    #[test]
    fn a_log_becomes_a_trace_with_sizes_prefixes_and_times() {
        let dir = std::env::temp_dir().join(format!("pb-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let lines = [
            r#"h - - [01/Jan/2020:00:00:00 +0000] "GET /a HTTP/1.1" 200 100"#,
            r#"h - - [01/Jan/2020:00:00:00 +0000] "GET /b HTTP/1.1" 200 1000"#,
            "garbage",
            r#"h - - [01/Jan/2020:00:00:01 +0000] "POST /c HTTP/1.1" 200 5"#,
            r#"h - - [01/Jan/2020:00:00:02 +0000] "GET /a?x HTTP/1.1" 304 0"#,
            r#"h - - [01/Jan/2020:00:00:02 +0000] "GET /missing HTTP/1.1" 404 153"#,
            r#"h - - [01/Jan/2020:00:00:04 +0000] "HEAD /c HTTP/1.1" 200 0"#,
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let t = Trace::load(&spec(path.to_str().unwrap(), "common")).unwrap();
        assert_eq!(t.lines, 7);
        assert_eq!((t.skipped.unparseable, t.skipped.method, t.skipped.status), (1, 1, 1));
        assert_eq!(t.skipped.examples[0].0, 3);
        assert_eq!(t.requests.len(), 4);
        assert_eq!(t.targets, vec!["a", "b", "a?x", "c"]);
        assert_eq!(t.files, vec!["a", "b", "c"]);
        assert_eq!(t.file_sizes, vec![100, 1000, 0]);
        assert_eq!(t.prefix(Some(500)), (1, 1, 100));
        assert_eq!(t.prefix(None), (4, 3, 1100));
        let (offsets, period) = t.offsets_ns(4);
        assert_eq!(offsets, vec![0, 500_000_000, 2_000_000_000, 4_000_000_000]);
        assert_eq!(period, 5_000_000_000);
        let mut s = ReplayStream::new(t, 2, true, true);
        let picks: Vec<String> = (0..3).map(|_| match s.next().unwrap().1 {
            Request::Read { path, len, .. } if len == WHOLE => path,
            other => panic!("{other:?}"),
        }).collect();
        assert_eq!(picks, vec!["a", "b", "a"]);
        // gzip input reads the same.
        let gz = dir.join("access.log.gz");
        let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, (lines.join("\n") + "\n").as_bytes()).unwrap();
        enc.finish().unwrap();
        let z = Trace::load(&spec(gz.to_str().unwrap(), "common")).unwrap();
        assert_eq!(z.requests, Trace::load(&spec(path.to_str().unwrap(), "common")).unwrap().requests);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
