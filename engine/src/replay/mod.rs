//! Access-log replay: a web server's log as the request stream (SPEC.md, "Replay").
//!
//! The log is read once, before the trial, into a compact trace: distinct request
//! targets and files (interned), and per request its target, method and time.
//! Common and Combined Log Formats are built in; any other layout is given as an
//! Apache (`%h %l %u %t "%r" %>s %b`) or nginx (`$remote_addr ... "$request" $status`)
//! format string. gzip input is recognised by its magic bytes. A line that does not
//! parse is never replayed silently: it is counted, and the first few are quoted with
//! their line number and what was wrong.

use crate::op::{Op, Request, WHOLE};
use crate::spec::{ReplaySpec, Share};
use anyhow::bail;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

mod blocks;
mod clf;
mod format;
mod intern;
mod structure;

pub use format::Format;

/// The file a request target names, relative to the document root: query dropped,
/// %XX decoded, "dir/" served as "dir/index.html". None for targets that could leave
/// the root ("..") or are not paths at all.
const NAME_MAX: usize = 255;
const PATH_MAX: usize = 4096;

pub fn file_of(target: &[u8]) -> Option<String> {
    let path = &target[..target.iter().position(|&c| c == b'?' || c == b'#').unwrap_or(target.len())];
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut decoded = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' && i + 2 < path.len() {
            // Two hex digits exactly: from_str_radix alone would also take a sign ("%+1").
            let digits = &path[i + 1..i + 3];
            let hex = digits.iter().all(u8::is_ascii_hexdigit).then(|| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()).flatten();
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
    // Paths no file system can hold are bad paths, like `..`: a NUL, a name or a path past
    // Linux's NAME_MAX and PATH_MAX (which also bounds the depth).
    if text.contains('\0') || text.len() >= PATH_MAX {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in text.split('/') {
        match seg {
            "" => {}
            "." | ".." => return None,
            s if s.len() > NAME_MAX => return None,
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

/// Why lines were not replayed.
#[derive(Default, Debug, Clone, Serialize)]
pub struct Skipped {
    pub unparseable: u64,
    pub method: u64,
    pub status: u64,
    pub path: u64,
    pub blank: u64,
    /// (line number, what was wrong, the line) for the first unparseable lines.
    #[serde(skip)]
    pub examples: Vec<(u64, String, String)>,
}

impl Skipped {
    pub fn unparseable(&mut self, line: u64, why: String, text: &[u8], keep: usize) {
        self.unparseable += 1;
        if self.examples.len() < keep {
            let mut shown = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
            if text.len() > 200 {
                shown.push('…');
            }
            self.examples.push((line, why, shown));
        }
    }

    /// Add the counts of a later block whose line 1 follows line `before`.
    fn absorb(&mut self, later: Skipped, before: u64, keep: usize) {
        self.unparseable += later.unparseable;
        self.method += later.method;
        self.status += later.status;
        self.path += later.path;
        self.blank += later.blank;
        let room = keep.saturating_sub(self.examples.len());
        self.examples.extend(later.examples.into_iter().take(room).map(|(line, why, text)| (before + line, why, text)));
    }
}

/// The distinct request targets and files met so far, by their bytes.
#[derive(Default)]
struct Interned {
    /// Targets as logged (origin stripped), and each one's index in the trace or NOT_A_FILE.
    targets: intern::Interner,
    trace_ids: Vec<u32>,
    files: HashMap<String, u32>,
    /// Per worker: the trace index of each target in its table.
    workers: Vec<Vec<u32>>,
}

/// A target that names no file inside the root: its requests are skipped.
const NOT_A_FILE: u32 = u32::MAX;

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

/// An access log that cannot be replayed (garbage, truncated, nothing usable in it): the
/// user's input is wrong, not the run, so the engine exits 2 for it as for a bad spec.
#[derive(Debug)]
pub struct BadLog(pub String);

impl std::fmt::Display for BadLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadLog {}

impl Trace {
    pub fn load(spec: &ReplaySpec) -> anyhow::Result<Trace> {
        Trace::load_in_blocks(spec, (blocks::BLOCK_BYTES, blocks::WORKER_TARGETS)).map_err(|e| anyhow::Error::new(BadLog(format!("{e:#}"))))
    }

    /// With blocks of `block_bytes` and worker tables of up to `table_limit` targets.
    fn load_in_blocks(spec: &ReplaySpec, sizes: (usize, usize)) -> anyhow::Result<Trace> {
        let started = std::time::Instant::now();
        let format = Format::parse(&spec.format).map_err(anyhow::Error::msg)?;
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
        let mut ids = Interned::default();
        blocks::parse_log(spec, &format, sizes, |block| t.merge(block, &mut ids, spec))?;
        t.skip_files_that_are_directories();
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

    /// Append a block's requests (the blocks come in log order), interning the targets
    /// new to the worker that parsed it.
    fn merge(&mut self, block: blocks::Parsed, ids: &mut Interned, spec: &ReplaySpec) -> anyhow::Result<()> {
        if ids.workers.len() <= block.worker {
            ids.workers.resize_with(block.worker + 1, Vec::new);
        }
        if self.lines == 0 && block.bytes > 0 {
            // The first block's share of the log's size says how many requests to make room
            // for (too few for a gzip log, which then grows as it must).
            let log_bytes = std::fs::metadata(&spec.log).map_or(0, |m| m.len() as usize);
            let expected = block.requests.len() * (log_bytes / block.bytes) + block.requests.len();
            self.requests.reserve(expected);
            self.times.reserve(expected);
        }
        let mut known = std::mem::take(&mut ids.workers[block.worker]);
        if block.fresh {
            known.clear();
        }
        for i in 0..block.new_targets.len() {
            known.push(self.intern(&block.new_targets, i, ids, spec)?);
        }
        for &(target, served) in &block.served {
            let id = known[target as usize];
            if id != NOT_A_FILE {
                let f = self.target_file[id as usize] as usize;
                self.file_sizes[f] = self.file_sizes[f].max(served);
            }
        }
        for (&r, &time) in block.requests.iter().zip(&block.times) {
            let id = known[(r >> 1) as usize];
            if id == NOT_A_FILE {
                self.skipped.path += 1;
                continue;
            }
            self.requests.push(id << 1 | (r & 1));
            self.times.push(time);
        }
        ids.workers[block.worker] = known;
        self.skipped.absorb(block.skipped, self.lines, spec.examples);
        self.lines += block.lines;
        Ok(())
    }

    /// The trace index of target `i` of a block's new ones, or NOT_A_FILE.
    fn intern(&mut self, block: &intern::Interner, i: usize, ids: &mut Interned, spec: &ReplaySpec) -> anyhow::Result<u32> {
        let target = block.get(i);
        let (n, new) = ids.targets.insert(target, block.hash_of(i));
        if !new {
            return Ok(ids.trace_ids[n as usize]);
        }
        let file = file_of(target);
        let sent = file.as_ref().and_then(|_| String::from_utf8(target[1..].to_vec()).ok());
        let id = match (file, sent) {
            (Some(file), Some(sent)) => {
                let fid = *ids.files.entry(file).or_insert_with_key(|f| {
                    self.files.push(f.clone());
                    self.file_sizes.push(0);
                    (self.files.len() - 1) as u32
                });
                let id = self.targets.len() as u32;
                if id >= u32::MAX >> 1 {
                    bail!("access log {}: more than 2 billion distinct paths", spec.log);
                }
                self.targets.push(sent);
                self.target_file.push(fid);
                id
            }
            _ => NOT_A_FILE,
        };
        ids.trace_ids.push(id);
        Ok(id)
    }

    /// A path served as a file and also as a directory of another file (`/x` and `/x/y`)
    /// cannot be both on disk: the requests for the file are skipped and counted as bad
    /// paths; the directory's files are kept.
    fn skip_files_that_are_directories(&mut self) {
        let clash: Vec<bool> = {
            let mut dirs: HashSet<&str> = HashSet::new();
            for f in &self.files {
                dirs.extend(f.match_indices('/').map(|(at, _)| &f[..at]));
            }
            self.files.iter().map(|f| dirs.contains(f.as_str())).collect()
        };
        if !clash.contains(&true) {
            return;
        }
        let mut kept = 0;
        for i in 0..self.requests.len() {
            let r = self.requests[i];
            if clash[self.target_file[(r >> 1) as usize] as usize] {
                self.skipped.path += 1;
                continue;
            }
            self.requests[kept] = r;
            self.times[kept] = self.times[i];
            kept += 1;
        }
        self.requests.truncate(kept);
        self.times.truncate(kept);
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

    /// Keep, of the first `len` requests, those at positions ≡ share.index (mod share.count), in
    /// order, as the trace's requests (and times); the kept count.
    pub fn keep_share(&mut self, len: usize, share: Share) -> usize {
        let kept = |i: &usize| i % share.count == share.index;
        self.requests = self.requests[..len].iter().enumerate().filter(|(i, _)| kept(i)).map(|(_, &r)| r).collect();
        self.times = self.times[..len].iter().enumerate().filter(|(i, _)| kept(i)).map(|(_, &t)| t).collect();
        self.requests.len()
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

    pub fn summary(&self, spec: &ReplaySpec, len: usize, files: u64, bytes: u64) -> ReplaySummary {
        let (_, all_files, all_bytes) = self.prefix(None);
        let span = if len > 0 { self.times[..len].iter().max().unwrap() - self.times[0] } else { 0 };
        ReplaySummary {
            log: spec.log.clone(),
            format: spec.format.clone(),
            lines: self.lines,
            replayable: self.requests.len(),
            skipped: self.skipped.clone(),
            first_unparseable: self
                .skipped
                .examples
                .iter()
                .map(|(line, why, text)| Unparseable { line: *line, error: why.clone(), text: text.clone() })
                .collect(),
            requests: len,
            files,
            dataset_bytes: bytes,
            log_files: all_files,
            log_dataset_bytes: all_bytes,
            truncated: len < self.requests.len(),
            span_s: span,
            parse_s: self.parse_s,
            share: None,
            issued: 0,
            loops: 0.0,
            exhausted_at_s: None,
        }
    }
}

/// What the replay read from its log, for the result (SPEC.md, "replay").
#[derive(Serialize, Debug)]
pub struct ReplaySummary {
    pub log: String,
    pub format: String,
    pub lines: u64,
    pub replayable: usize,
    pub skipped: Skipped,
    pub first_unparseable: Vec<Unparseable>,
    /// The (truncated) stream.
    pub requests: usize,
    pub files: u64,
    pub dataset_bytes: u64,
    pub log_files: u64,
    pub log_dataset_bytes: u64,
    pub truncated: bool,
    pub span_s: i64,
    pub parse_s: f64,
    /// The part of the stream this engine replays when it is one of several load clients.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareSummary>,
    /// Filled in after the trial: requests sent, how often the stream was gone through, and when
    /// a stream that does not loop ran out.
    pub issued: u64,
    pub loops: f64,
    pub exhausted_at_s: Option<f64>,
}

#[derive(Serialize, Debug)]
pub struct ShareSummary {
    pub index: usize,
    pub count: usize,
    pub requests: usize,
}

#[derive(Serialize, Debug)]
pub struct Unparseable {
    pub line: u64,
    pub error: String,
    pub text: String,
}

/// Size classes of the per-class latency breakdown (by the size the log served).
pub const SIZE_CLASSES: [(u64, &str); 5] =
    [(1 << 10, "<1KiB"), (10 << 10, "1-10KiB"), (100 << 10, "10-100KiB"), (1 << 20, "100KiB-1MiB"), (u64::MAX, ">=1MiB")];

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
            (Op::Read, Request::Read { path, file: None, offset: 0, len: WHOLE, xfer: 64 << 10 }, Some(target), class)
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
    use serde_json::json;

    fn spec(log: &str, format: &str) -> ReplaySpec {
        serde_json::from_value(json!({"log": log, "format": format})).unwrap()
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
        assert_eq!(file_of(b"/a%+1b"), None); // a sign is not a hex digit
        assert_eq!(file_of(b"/a%4Ab").as_deref(), Some("aJb"));
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
        let picks: Vec<String> = (0..3)
            .map(|_| match s.next().unwrap().1 {
                Request::Read { path, len, .. } if len == WHOLE => path,
                other => panic!("{other:?}"),
            })
            .collect();
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

    #[test]
    fn blocks_and_worker_tables_of_any_size_make_the_same_trace() {
        let dir = std::env::temp_dir().join(format!("pb-replay-blocks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let mut text = String::new();
        for i in 0..300 {
            let line = match i % 7 {
                0 => format!(r#"h - - [01/Jan/2020:00:{:02}:00 +0000] "GET /f{} HTTP/1.1" 200 {}"#, i / 60, i % 11, i),
                1 => format!("broken line {i}"),
                2 => "   ".to_string(),
                3 => format!(r#"h - - [01/Jan/2020:00:00:00 +0000] "GET /a/../{i} HTTP/1.1" 200 1"#),
                4 => format!(r#"h - - [01/Jan/2020:00:00:00 +0000] "HEAD /long{}{} HTTP/1.1" 200 0"#, i, "x".repeat(240)), // long, within NAME_MAX
                5 => format!(r#"h - - [01/Jan/2020:00:00:00 +0000] "POST /f{i} HTTP/1.1" 200 0"#),
                _ => format!(r#"h - - [01/Jan/2020:00:00:01 +0000] "GET /f{} HTTP/1.1" 304 0"#, i % 5),
            };
            text.push_str(&line);
            text.push_str(if i % 2 == 0 { "\r\n" } else { "\n" });
        }
        text.push_str(r#"h - - [01/Jan/2020:00:09:00 +0000] "GET /last HTTP/1.1" 200 9"#); // no newline at the end
        std::fs::write(&path, &text).unwrap();
        let mut s = spec(path.to_str().unwrap(), "common");
        s.examples = 50;
        let whole = Trace::load_in_blocks(&s, (1 << 20, 1 << 20)).unwrap();
        assert_eq!(whole.lines, 301);
        assert_eq!(whole.skipped.unparseable, 43);
        assert_eq!(whole.skipped.examples.iter().map(|e| e.0).take(3).collect::<Vec<_>>(), vec![2, 9, 16]);
        assert_eq!((whole.skipped.blank, whole.skipped.path, whole.skipped.method), (43, 43, 43));
        assert_eq!(whole.targets.last().map(String::as_str), Some("last"));
        // Worker tables of 3 targets start again every few blocks.
        for (block_bytes, table_limit) in [(1, 1 << 20), (7, 3), (100, 1 << 20), (100, 3), (4096, 1 << 20)] {
            let t = Trace::load_in_blocks(&s, (block_bytes, table_limit)).unwrap();
            assert_same_trace(&t, &whole, &format!("{block_bytes} {table_limit}"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Same requests, times, files and sizes, and the same report of skipped lines.
    fn assert_same_trace(t: &Trace, expected: &Trace, what: &str) {
        assert_eq!((t.lines, &t.requests, &t.times, &t.targets), (expected.lines, &expected.requests, &expected.times, &expected.targets), "{what}");
        assert_eq!((&t.target_file, &t.files, &t.file_sizes), (&expected.target_file, &expected.files, &expected.file_sizes), "{what}");
        let counts = |t: &Trace| (t.skipped.unparseable, t.skipped.method, t.skipped.status, t.skipped.path, t.skipped.blank);
        assert_eq!(counts(t), counts(expected), "{what}");
        assert_eq!(t.skipped.examples, expected.skipped.examples, "{what}");
    }

    #[test]
    fn common_and_combined_read_as_their_format_strings_do() {
        use rand::{Rng, SeedableRng};
        let dir = std::env::temp_dir().join(format!("pb-replay-clf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let (mut common, mut combined) = (String::new(), String::new());
        let mut second = 0u32;
        for i in 0..20_000u32 {
            second += rng.random_range(0..3);
            let time = format!(
                "{:02}/Mar/2021:{:02}:{:02}:{:02} {}",
                1 + second / 86_400,
                second / 3600 % 24,
                second / 60 % 60,
                second % 60,
                ["+0000", "-0700"][(second / 5000) as usize % 2]
            );
            let (method, status) = (["GET", "GET", "GET", "HEAD", "POST"][rng.random_range(0..5)], [200, 200, 206, 304, 404][rng.random_range(0..5)]);
            let target = match rng.random_range(0..20) {
                0 => format!("http://example.org/d{}/f{}?q={i}", i % 7, rng.random_range(0..500)),
                1 => format!("/d{}/../f", i % 7),
                _ => format!("/d{}/f{}.html", i % 7, rng.random_range(0..500)),
            };
            let mut line = format!(r#"10.0.{}.{} - - [{time}] "{method} {target} HTTP/1.1" {status} {}"#, i % 256, i % 7, rng.random_range(0..100_000));
            // One line in 50 is broken in a way the scan must leave to the format-string walk.
            let broken: [(&str, &str); 8] = [
                ("] \"", "] \"-\" "),
                (":", "-"),
                ("HTTP/1.1", "HTTP/1.1 x\\\"y"),
                (" - - ", "  - "),
                ("\" 2", "\" x"),
                ("\" ", "\"  "),
                ("Mar", "Foo"),
                (" +0000", ""),
            ];
            if i % 50 == 7 {
                let (from, to) = broken[rng.random_range(0..broken.len())];
                line = line.replacen(from, to, 1);
            }
            let agent = ["curl/8", "Mozilla/5.0 (X11; \\\"quoted\\\")", "-", ""][rng.random_range(0..4)];
            combined.push_str(&format!("{line} \"http://r/{i}\" \"{agent}\"{}", if i % 31 == 0 { " x\n" } else { "\n" }));
            common.push_str(&line);
            common.push_str(if i % 3 == 0 { "\r\n" } else { "\n" });
        }
        let cases = [("common", common, "%a %l %u %t \"%r\" %>s %b"), ("combined", combined, "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"")];
        for (name, text, spelled_out) in cases {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let mut s = spec(path.to_str().unwrap(), name);
            s.examples = 1000;
            let scanned = Trace::load(&s).unwrap();
            s.format = spelled_out.to_string();
            assert!(Format::parse(&s.format).unwrap().layout.is_none(), "{name}: not the format-string walk");
            let walked = Trace::load(&s).unwrap();
            assert_same_trace(&scanned, &walked, name);
            assert!(
                walked.skipped.unparseable > 200 && walked.requests.len() > 10_000,
                "{name}: {} unparseable, {} requests",
                walked.skipped.unparseable,
                walked.requests.len()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_log_that_breaks_off_says_after_which_line() {
        let dir = std::env::temp_dir().join(format!("pb-replay-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("access.log.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        for i in 0..20_000 {
            std::io::Write::write_all(&mut enc, format!("h - - [01/Jan/2020:00:00:00 +0000] \"GET /f{i} HTTP/1.1\" 200 {i}\n").as_bytes()).unwrap();
        }
        let bytes = enc.finish().unwrap();
        std::fs::write(&gz, &bytes[..bytes.len() / 2]).unwrap();
        let err = format!("{:#}", Trace::load_in_blocks(&spec(gz.to_str().unwrap(), "common"), (4096, 1 << 20)).err().expect("a cut gzip stream fails"));
        let after: u64 =
            err.split("after line ").nth(1).and_then(|rest| rest.split(':').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{err}"));
        assert!(err.starts_with(&format!("access log {}: after line", gz.display())) && after > 1000 && after < 20_000, "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
