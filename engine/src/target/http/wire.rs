//! HTTP/1.1 on one connection: a request's bytes going out, and a reply parser fed whatever
//! bytes have arrived, so the blocking path and the event loop share one parser (it is fuzzed).

use super::{io_kind, Response};
use memchr::memmem::Finder;
use std::io::{ErrorKind, Read, Write};
use std::sync::LazyLock;
use std::time::Instant;

pub const READ_BUF: usize = 64 * 1024;
/// Request bodies up to this size go out in the same write as the head.
const INLINE_BODY: u64 = 16 * 1024;

/// What a request carries.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    None,
    /// This many bytes of the deterministic file content (what prepare writes).
    Content(u64),
    Bytes(&'a [u8]),
}

impl Body<'_> {
    fn len(&self) -> u64 {
        match self {
            Body::None => 0,
            Body::Content(n) => *n,
            Body::Bytes(b) => b.len() as u64,
        }
    }
}

/// One connection and the reply bytes read but not yet parsed; generic over the stream so the
/// fuzz test can feed it bytes from memory.
pub struct Conn<S> {
    pub stream: S,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl<S: Read> Conn<S> {
    pub fn new(stream: S) -> Conn<S> {
        Conn { stream, buf: vec![0u8; READ_BUF].into_boxed_slice(), start: 0, end: 0 }
    }

    /// Read what the stream has into the buffer; Ok(0) means the peer closed. Never called with
    /// a full buffer: the parser gives up on a head or line that fills it.
    pub fn fill(&mut self) -> std::io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Bytes arrived that no request asked for (on an idle connection).
    pub fn has_unread(&self) -> bool {
        self.start != self.end
    }

    fn take(&mut self, n: usize, keep: &mut Option<Vec<u8>>) {
        if let Some(k) = keep.as_mut() {
            k.extend_from_slice(&self.buf[self.start..self.start + n]);
        }
        self.start += n;
    }

    /// The next line without its CRLF, or None until it has arrived.
    fn line(&mut self, eof: bool) -> Result<Option<Vec<u8>>, String> {
        if let Some(i) = CRLF.find(&self.buf[self.start..self.end]) {
            let line = self.buf[self.start..self.start + i].to_vec();
            self.start += i + 2;
            return Ok(Some(line));
        }
        if self.end - self.start >= self.buf.len() {
            return Err("http_bad_response".into());
        }
        if eof {
            return Err("http_truncated".into());
        }
        Ok(None)
    }
}

/// A request's bytes: the head (with a small body inline), then `body` bytes of the file content.
pub struct Outgoing {
    bytes: Vec<u8>,
    at: usize,
    body: u64,
    body_at: u64,
}

impl Outgoing {
    pub fn new(host: &str, method: &str, path: &str, headers: &str, body: Body, content: &[u8]) -> Outgoing {
        let body_len = body.len();
        let mut head = String::with_capacity(96 + path.len() + headers.len());
        head.push_str(method);
        head.push(' ');
        head.push_str(path);
        head.push_str(" HTTP/1.1\r\nHost: ");
        head.push_str(host);
        head.push_str("\r\n");
        head.push_str(headers);
        if body_len > 0 || method == "PUT" {
            head.push_str("Content-Length: ");
            head.push_str(&body_len.to_string());
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        let mut streamed = 0;
        match body {
            Body::Bytes(b) => bytes.extend_from_slice(b),
            Body::Content(n) if n <= INLINE_BODY => bytes.extend_from_slice(&content[..n as usize]),
            Body::Content(n) => streamed = n,
            Body::None => {}
        }
        Outgoing { bytes, at: 0, body: streamed, body_at: 0 }
    }

    /// Write as much as the stream takes: Ok(true) once all is out, Ok(false) when the stream
    /// would block (a full non-blocking socket, or a blocking one's write timeout).
    pub fn write_to(&mut self, stream: &mut impl Write, content: &[u8]) -> std::io::Result<bool> {
        while self.at < self.bytes.len() {
            match stream.write(&self.bytes[self.at..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.at += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        while self.body_at < self.body {
            let start = (self.body_at % content.len() as u64) as usize;
            let n = ((self.body - self.body_at) as usize).min(content.len() - start);
            match stream.write(&content[start..start + n]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.body_at += n as u64,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        // TLS records rustls still holds (a plain socket holds none: flush is a no-op).
        match stream.flush() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            other => other.map(|()| true),
        }
    }

    /// Send it again from the start (a retry on a fresh connection).
    pub fn rewind(&mut self) {
        self.at = 0;
        self.body_at = 0;
    }
}

/// What the response head said about the body and the connection.
struct HeadMeta {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    allow: String,
}

enum State {
    Head { scanned: usize },
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    ToEof,
}

pub enum Step {
    More,
    /// The reply, and whether the connection can carry another request.
    Done(Response, bool),
}

/// One reply being parsed: its head, then its body as the head frames it.
pub struct Reply {
    head_only: bool,
    keep: Option<Vec<u8>>,
    state: State,
    status: u16,
    meta: HeadMeta,
    bytes: u64,
}

impl Reply {
    /// The reply to `method`; `keep_body`: collect the body (metadata reads, PROPFIND).
    pub fn new(method: &str, keep_body: bool) -> Reply {
        Reply {
            head_only: method == "HEAD",
            keep: keep_body.then(Vec::new),
            state: State::Head { scanned: 0 },
            status: 0,
            meta: HeadMeta { content_length: None, chunked: false, close: false, allow: String::new() },
            bytes: 0,
        }
    }

    /// Nothing of the reply has come (so a failure may be a kept-alive connection the server closed).
    pub fn untouched<S>(&self, conn: &Conn<S>) -> bool {
        matches!(self.state, State::Head { .. }) && conn.start == conn.end
    }

    /// Parse the buffered bytes as far as they go; `eof`: the peer closed, nothing more comes.
    pub fn advance<S: Read>(&mut self, conn: &mut Conn<S>, eof: bool) -> Result<Step, String> {
        loop {
            match self.state {
                State::Head { scanned } => {
                    let got = &conn.buf[conn.start..conn.end];
                    let Some(i) = HEAD_END.find(&got[scanned..]) else {
                        self.state = State::Head { scanned: got.len().saturating_sub(3) };
                        // Bytes that cannot begin a reply are a bad reply now, not a timeout later.
                        match memchr::memchr(b'\n', got) {
                            Some(eol) => drop(status_line(&got[..eol])?),
                            None if !VERSION.starts_with(&got[..got.len().min(VERSION.len())]) => return Err("http_bad_response".into()),
                            None => {}
                        }
                        if got.len() >= conn.buf.len() {
                            return Err("http_bad_response".into()); // a head larger than the buffer
                        }
                        return if eof { Err("http_eof".into()) } else { Ok(Step::More) };
                    };
                    let head_end = scanned + i + 4;
                    (self.status, self.meta) = parse_head(&got[..head_end])?;
                    conn.start += head_end;
                    let no_body = self.head_only || self.status == 204 || self.status == 304 || (100..200).contains(&self.status);
                    self.state = if no_body {
                        return Ok(self.done(!self.meta.close));
                    } else if self.meta.chunked {
                        State::ChunkSize
                    } else if let Some(n) = self.meta.content_length {
                        State::Length(n)
                    } else {
                        State::ToEof // the body ends when the server closes
                    };
                }
                State::Length(left) | State::ChunkData(left) => {
                    let k = ((conn.end - conn.start) as u64).min(left) as usize;
                    conn.take(k, &mut self.keep);
                    self.bytes += k as u64;
                    let left = left - k as u64;
                    let chunk = matches!(self.state, State::ChunkData(_));
                    self.state = match (left, chunk) {
                        (0, false) => return Ok(self.done(!self.meta.close)),
                        (0, true) => State::ChunkEnd,
                        (left, false) => State::Length(left),
                        (left, true) => State::ChunkData(left),
                    };
                    if left > 0 {
                        return if eof { Err("http_truncated".into()) } else { Ok(Step::More) };
                    }
                }
                State::ChunkSize => {
                    let Some(line) = conn.line(eof)? else { return Ok(Step::More) };
                    let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
                    let size = u64::from_str_radix(std::str::from_utf8(trim(hex)).map_err(|_| "http_bad_response")?, 16).map_err(|_| "http_bad_response")?;
                    self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
                }
                State::ChunkEnd => {
                    let Some(line) = conn.line(eof)? else { return Ok(Step::More) };
                    if !line.is_empty() {
                        return Err("http_bad_response".into());
                    }
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(line) = conn.line(eof)? else { return Ok(Step::More) };
                    if line.is_empty() {
                        return Ok(self.done(!self.meta.close));
                    }
                }
                State::ToEof => {
                    let k = conn.end - conn.start;
                    conn.take(k, &mut self.keep);
                    self.bytes += k as u64;
                    return Ok(if eof { self.done(false) } else { Step::More });
                }
            }
        }
    }

    fn done(&mut self, reusable: bool) -> Step {
        let meta = &mut self.meta;
        let response = Response {
            status: self.status,
            bytes: self.bytes,
            length: meta.content_length,
            allow: std::mem::take(&mut meta.allow),
            body: self.keep.take().unwrap_or_default(),
        };
        Step::Done(response, reusable)
    }
}

/// Read one whole reply from a blocking stream. Err carries whether nothing of it came back.
pub fn read_reply<S: Read>(conn: &mut Conn<S>, mut reply: Reply, deadline: Instant) -> Result<(Response, bool), (String, bool)> {
    let mut eof = false;
    loop {
        match reply.advance(conn, eof) {
            Ok(Step::Done(response, reusable)) => return Ok((response, reusable)),
            Ok(Step::More) => {}
            Err(e) => return Err((e, reply.untouched(conn))),
        }
        if Instant::now() >= deadline {
            return Err(("ETIMEDOUT".into(), reply.untouched(conn)));
        }
        match conn.fill() {
            Ok(n) => eof = n == 0,
            Err(e) => return Err((io_kind(&e), reply.untouched(conn))),
        }
    }
}

const VERSION: &[u8] = b"HTTP/1.";
/// Built once: memmem::find builds its searcher anew on every call.
static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));
static CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n"));

/// "HTTP/1.1 200 OK": the status (three digits, 100 to 599) and whether the server speaks HTTP/1.0.
fn status_line(line: &[u8]) -> Result<(u16, bool), String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let bad = || "http_bad_response".to_string();
    let rest = line.strip_prefix(VERSION).ok_or_else(bad)?;
    let (minor, code) = (rest.first().ok_or_else(bad)?, rest.get(2..5).ok_or_else(bad)?);
    if !matches!(minor, b'0' | b'1') || rest[1] != b' ' || !code.iter().all(u8::is_ascii_digit) || rest.get(5).is_some_and(|&b| b != b' ') {
        return Err(bad());
    }
    let status = code.iter().fold(0u16, |n, d| n * 10 + (d - b'0') as u16);
    if !(100..600).contains(&status) {
        return Err(bad());
    }
    Ok((status, *minor == b'0'))
}

/// The status and the headers peakbench uses, from a whole head (status line to the empty line).
/// Lines and colons are found with memchr: a byte-at-a-time split made this parse a large
/// share of a request's user-space instructions (BENCHMARKS.md §6, callgrind).
fn parse_head(head: &[u8]) -> Result<(u16, HeadMeta), String> {
    let mut lines = memchr::memchr_iter(b'\n', head);
    let first = lines.next().unwrap_or(head.len());
    let (status, http10) = status_line(&head[..first])?;
    let mut meta = HeadMeta { content_length: None, chunked: false, close: http10, allow: String::new() };
    let mut start = first + 1;
    for end in lines {
        let line = &head[start..end];
        start = end + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = memchr::memchr(b':', line) else { continue };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            meta.content_length = Some(std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()).ok_or("http_bad_response")?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            meta.chunked = contains_ci(value, b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_ci(value, b"close") {
                meta.close = true;
            } else if contains_ci(value, b"keep-alive") {
                meta.close = false;
            }
        } else if name.eq_ignore_ascii_case(b"allow") {
            meta.allow = String::from_utf8_lossy(value).into_owned();
        }
    }
    Ok((status, meta))
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &s[start..end]
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}
