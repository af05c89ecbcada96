//! An HTTP/1.1 server (`http://host:port/base/`). A minimal blocking client with
//! keep-alive connections in a small pool: each sender thread takes a connection,
//! sends one request, reads the whole response and puts the connection back, so
//! the engine's blocking sender model applies unchanged (one request in flight
//! per connection; the pool grows with the outstanding requests).
//!
//! Ops map onto methods (SPEC.md): read = GET (whole file) or a Range GET, getattr /
//! access / commit = HEAD (or a conditional GET), lookup = HEAD of dir/name, readdir =
//! GET of the directory (an index listing), fsstat / fsinfo / pathconf / null = HEAD of
//! the file-set root; with WebDAV methods, write = PUT of the file up to the end of the
//! write (HTTP has no partial PUT), create = empty PUT, remove / rmdir = DELETE,
//! mkdir = MKCOL, rename = MOVE. Setattr, symlink, link and readlink have no HTTP form.
//!
//! Statuses 2xx and 304 succeed; any other status is the error `http_NNN`. Transport
//! failures are errno names (ECONNREFUSED, ECONNRESET, ETIMEDOUT...), a connection
//! closed before a whole response head is `http_eof`, a body shorter than its
//! Content-Length `http_truncated`, an unparseable response `http_bad_response`.
//! Every request has one deadline (the target's timeout) across all its reads and writes.

use super::posix::{errno_name, Posix};
use super::{FileStore, Target};
use crate::op::{Op, Outcome, Request, WHOLE};
use crate::spec::GetattrMethod;
use anyhow::{anyhow, bail, Context};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const READ_BUF: usize = 64 * 1024;
/// Request bodies up to this size go out in the same write as the head.
const INLINE_BODY: u64 = 16 * 1024;

pub struct Http {
    url: String,
    addr: SocketAddr,
    host: String,
    /// URL path of the target's root, starting and ending with '/'.
    base: String,
    /// `base`, or the file-set root under it once entered.
    prefix: String,
    /// The directory the server serves, when the file set is built there instead of through HTTP.
    docroot: Option<Posix>,
    timeout: Duration,
    conditional_getattr: bool,
    writable: bool,
    pool: Mutex<Vec<Conn>>,
    content: Vec<u8>,
}

/// One connection; generic over the stream so the fuzz test can feed it bytes from memory.
struct Conn<S = TcpStream> {
    stream: S,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

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

/// What came back: status and body bytes.
pub struct Response {
    pub status: u16,
    pub bytes: u64,
    /// The Content-Length header (for HEAD: the size of the resource).
    pub length: Option<u64>,
    /// The Allow header (OPTIONS).
    pub allow: String,
    /// The body, when asked for (metadata reads and PROPFIND).
    pub body: Vec<u8>,
}

fn io_kind(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => "ETIMEDOUT".into(),
        ErrorKind::UnexpectedEof => "http_eof".into(),
        _ => match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => "ECONNREFUSED".into(),
            Some(libc::ECONNRESET) => "ECONNRESET".into(),
            Some(libc::ECONNABORTED) => "ECONNABORTED".into(),
            Some(libc::EPIPE) => "EPIPE".into(),
            Some(libc::EHOSTUNREACH) => "EHOSTUNREACH".into(),
            Some(libc::ENETUNREACH) => "ENETUNREACH".into(),
            Some(libc::EADDRNOTAVAIL) => "EADDRNOTAVAIL".into(),
            Some(code) => errno_name(code),
            None => format!("io_{:?}", e.kind()),
        },
    }
}

/// Split `http://host[:port]/path` into (host:port, path ending in '/').
pub fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url.strip_prefix("http://").ok_or_else(|| anyhow!("{url}: only http:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        bail!("{url}: no host");
    }
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let authority = if has_port { authority.to_string() } else { format!("{authority}:80") };
    let mut base = path.split(['?', '#']).next().unwrap_or("/").to_string();
    if !base.ends_with('/') {
        base.push('/');
    }
    Ok((authority, base))
}

impl Http {
    pub fn open(url: &str, docroot: Option<&str>, timeout_s: f64, getattr: GetattrMethod, writable: Option<bool>) -> anyhow::Result<Http> {
        let (authority, base) = split_url(url)?;
        let addr = authority
            .to_socket_addrs()
            .with_context(|| format!("target {url}: cannot resolve {authority}"))?
            .next()
            .ok_or_else(|| anyhow!("target {url}: {authority} has no address"))?;
        let docroot = docroot.map(Posix::open).transpose()?;
        let mut http = Http {
            url: url.to_string(),
            addr,
            host: authority,
            prefix: base.clone(),
            base,
            docroot,
            timeout: Duration::from_secs_f64(timeout_s),
            conditional_getattr: getattr == GetattrMethod::Conditional,
            writable: false,
            pool: Mutex::new(Vec::new()),
            content: crate::content::block(0),
        };
        // Reachable at all? One clear line now instead of every request failing later.
        // Writable when the server says it allows PUT (WebDAV), unless the spec says.
        let probe = http.request("OPTIONS", &http.base.clone(), "", Body::None, false).map_err(|e| anyhow!("target {url}: {e}"))?;
        let allows_put = probe.status < 300 && probe.allow.split(',').any(|m| m.trim().eq_ignore_ascii_case("PUT"));
        http.writable = writable.unwrap_or(allows_put);
        Ok(http)
    }

    fn connect(&self) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&self.addr, self.timeout).map_err(|e| io_kind(&e))?;
        let _ = stream.set_nodelay(true);
        // Set once: a blocked read or write gives up after the timeout, and every read checks
        // the request's deadline, so no request outlives twice the timeout.
        let _ = stream.set_read_timeout(Some(self.timeout));
        let _ = stream.set_write_timeout(Some(self.timeout));
        Ok(Conn { stream, buf: vec![0u8; READ_BUF].into_boxed_slice(), start: 0, end: 0 })
    }

    /// One request on a pooled connection. A reused connection that the server closed
    /// while idle fails (closed or reset) before any response byte arrives: that request
    /// is retried once on a fresh connection, as every HTTP client does. A timeout is not.
    pub fn request(&self, method: &str, path: &str, headers: &str, body: Body, keep_body: bool) -> Result<Response, String> {
        let pooled = self.pool.lock().expect("pool lock").pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        let deadline = Instant::now() + self.timeout;
        match conn.exchange(self, method, path, headers, body, keep_body, deadline) {
            Ok((response, keep)) => {
                if keep {
                    self.pool.lock().expect("pool lock").push(conn);
                }
                Ok(response)
            }
            Err((e, true)) if reused && matches!(e.as_str(), "http_eof" | "ECONNRESET" | "EPIPE" | "ECONNABORTED") => {
                drop(conn);
                let mut fresh = self.connect()?;
                let deadline = Instant::now() + self.timeout;
                let (response, keep) = fresh.exchange(self, method, path, headers, body, keep_body, deadline).map_err(|(e, _)| e)?;
                if keep {
                    self.pool.lock().expect("pool lock").push(fresh);
                }
                Ok(response)
            }
            Err((e, _)) => Err(e),
        }
    }

    fn url_path(&self, path: &str) -> String {
        let mut p = String::with_capacity(self.prefix.len() + path.len() + 1);
        p.push_str(&self.prefix);
        p.push_str(path);
        p
    }

    fn dir_url(&self, path: &str) -> String {
        let mut p = self.url_path(path);
        if !p.ends_with('/') {
            p.push('/');
        }
        p
    }

    fn status(r: Result<Response, String>) -> Outcome {
        let r = r?;
        if (200..300).contains(&r.status) || r.status == 304 {
            Ok(r.bytes)
        } else {
            Err(format!("http_{}", r.status))
        }
    }

    fn head(&self, url: &str) -> Outcome {
        if self.conditional_getattr {
            Self::status(self.request("GET", url, "If-None-Match: *\r\n", Body::None, false))
        } else {
            Self::status(self.request("HEAD", url, "", Body::None, false))
        }
    }

    fn put(&self, url: &str, size: u64) -> Outcome {
        Self::status(self.request("PUT", url, "", Body::Content(size), false)).map(|_| size)
    }

    fn fail(&self, what: &str, path: &str, e: String) -> anyhow::Error {
        anyhow!("target {}: {what} {path}: {e}", self.url)
    }
}

/// What the response head said about the body and the connection.
struct HeadMeta {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    allow: String,
}

impl<S: Read + Write> Conn<S> {
    /// Send the request and read the whole response. Err carries whether nothing at all came back.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &mut self,
        http: &Http,
        method: &str,
        path: &str,
        headers: &str,
        body: Body,
        keep_body: bool,
        deadline: Instant,
    ) -> Result<(Response, bool), (String, bool)> {
        let body_len = body.len();
        let mut head = String::with_capacity(96 + path.len() + headers.len());
        head.push_str(method);
        head.push(' ');
        head.push_str(path);
        head.push_str(" HTTP/1.1\r\nHost: ");
        head.push_str(&http.host);
        head.push_str("\r\n");
        head.push_str(headers);
        if body_len > 0 || method == "PUT" {
            head.push_str("Content-Length: ");
            head.push_str(&body_len.to_string());
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let sent = if let Body::Bytes(bytes) = body {
            self.stream.write_all(head.as_bytes()).and_then(|_| self.stream.write_all(bytes))
        } else if body_len > 0 && body_len <= INLINE_BODY {
            let mut out = head.into_bytes();
            out.extend_from_slice(&http.content[..body_len as usize]);
            self.stream.write_all(&out)
        } else {
            self.stream.write_all(head.as_bytes()).and_then(|_| {
                let mut at = 0u64;
                while at < body_len {
                    let start = (at % http.content.len() as u64) as usize;
                    let n = ((body_len - at) as usize).min(http.content.len() - start);
                    self.stream.write_all(&http.content[start..start + n])?;
                    at += n as u64;
                }
                Ok(())
            })
        };
        if let Err(e) = sent {
            return Err((io_kind(&e), true));
        }
        self.read_reply(method, keep_body, deadline)
    }

    /// Read one reply to `method`: its head, then its body as the head frames it.
    fn read_reply(&mut self, method: &str, keep_body: bool, deadline: Instant) -> Result<(Response, bool), (String, bool)> {
        let (status, meta) = match self.read_head(deadline) {
            Ok(x) => x,
            Err(e) => return Err((e, self.end == 0 && self.start == 0)),
        };
        let no_body = method == "HEAD" || status == 204 || status == 304 || (100..200).contains(&status);
        let mut kept = Vec::new();
        let keep = keep_body.then_some(&mut kept);
        let (bytes, reusable) = if no_body {
            (0, !meta.close)
        } else if meta.chunked {
            (self.read_chunked(deadline, keep).map_err(|e| (e, false))?, !meta.close)
        } else if let Some(n) = meta.content_length {
            (self.read_exact_discard(n, deadline, keep).map_err(|e| (e, false))?, !meta.close)
        } else {
            (self.read_to_eof(deadline, keep).map_err(|e| (e, false))?, false) // the body ends when the server closes
        };
        Ok((Response { status, bytes, length: meta.content_length, allow: meta.allow, body: kept }, reusable))
    }

    /// Fill the buffer with more bytes; 0 means the peer closed.
    fn fill(&mut self, deadline: Instant) -> Result<usize, String> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if Instant::now() >= deadline {
            return Err("ETIMEDOUT".into());
        }
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_kind(&e)),
            }
        }
    }

    fn read_head(&mut self, deadline: Instant) -> Result<(u16, HeadMeta), String> {
        // Offsets relative to `start`: fill() may move the buffered bytes.
        let mut scanned = 0;
        let head_end = loop {
            if let Some(i) = find(&self.buf[self.start + scanned..self.end], b"\r\n\r\n") {
                break self.start + scanned + i + 4;
            }
            scanned = (self.end - self.start).saturating_sub(3);
            if self.end - self.start >= self.buf.len() {
                return Err("http_bad_response".into()); // a head larger than the buffer
            }
            if self.fill(deadline)? == 0 {
                return Err("http_eof".into());
            }
            // Bytes that cannot begin a reply are a bad reply now, not a timeout later.
            let got = &self.buf[self.start..self.end];
            match memchr::memchr(b'\n', got) {
                Some(eol) => drop(status_line(&got[..eol])?),
                None if !VERSION.starts_with(&got[..got.len().min(VERSION.len())]) => return Err("http_bad_response".into()),
                None => {}
            }
        };
        let head = &self.buf[self.start..head_end];
        self.start = head_end;
        parse_head(head)
    }

    fn take(&mut self, n: usize, keep: &mut Option<&mut Vec<u8>>) {
        if let Some(k) = keep.as_mut() {
            k.extend_from_slice(&self.buf[self.start..self.start + n]);
        }
        self.start += n;
    }

    fn read_exact_discard(&mut self, n: u64, deadline: Instant, mut keep: Option<&mut Vec<u8>>) -> Result<u64, String> {
        let mut left = n;
        while left > 0 {
            if self.start == self.end && self.fill(deadline)? == 0 {
                return Err("http_truncated".into());
            }
            let k = ((self.end - self.start) as u64).min(left) as usize;
            self.take(k, &mut keep);
            left -= k as u64;
        }
        Ok(n)
    }

    fn read_to_eof(&mut self, deadline: Instant, mut keep: Option<&mut Vec<u8>>) -> Result<u64, String> {
        let mut n = 0u64;
        loop {
            let k = self.end - self.start;
            self.take(k, &mut keep);
            n += k as u64;
            if self.fill(deadline)? == 0 {
                return Ok(n);
            }
        }
    }

    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        loop {
            if let Some(i) = find(&self.buf[self.start..self.end], b"\r\n") {
                let line = self.buf[self.start..self.start + i].to_vec();
                self.start += i + 2;
                return Ok(line);
            }
            if self.end - self.start >= self.buf.len() {
                return Err("http_bad_response".into());
            }
            if self.fill(deadline)? == 0 {
                return Err("http_truncated".into());
            }
        }
    }

    fn read_chunked(&mut self, deadline: Instant, mut keep: Option<&mut Vec<u8>>) -> Result<u64, String> {
        let mut total = 0u64;
        loop {
            let line = self.read_line(deadline)?;
            let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
            let size = u64::from_str_radix(std::str::from_utf8(trim(hex)).map_err(|_| "http_bad_response")?, 16).map_err(|_| "http_bad_response")?;
            if size == 0 {
                // Trailers, then the empty line.
                while !self.read_line(deadline)?.is_empty() {}
                return Ok(total);
            }
            total += self.read_exact_discard(size, deadline, keep.as_deref_mut())?;
            if !self.read_line(deadline)?.is_empty() {
                return Err("http_bad_response".into());
            }
        }
    }
}

const VERSION: &[u8] = b"HTTP/1.";

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
fn parse_head(head: &[u8]) -> Result<(u16, HeadMeta), String> {
    let mut lines = head.split(|&b| b == b'\n');
    let (status, http10) = status_line(lines.next().unwrap_or(b""))?;
    let mut meta = HeadMeta { content_length: None, chunked: false, close: http10, allow: String::new() };
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
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

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &s[start..end]
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

impl Target for Http {
    fn supports(&self, op: Op) -> bool {
        match op {
            Op::Setattr | Op::Symlink | Op::Link | Op::Readlink | Op::Lock => false,
            op if op.explicit_handle() => false,
            Op::Write | Op::Create | Op::Remove | Op::Mkdir | Op::Rmdir | Op::Rename => self.writable,
            _ => true,
        }
    }

    fn execute(&self, request: &Request) -> Outcome {
        match request {
            Request::Null | Request::Fsstat | Request::Fsinfo | Request::Pathconf => Self::status(self.request("HEAD", &self.prefix, "", Body::None, false)),
            Request::Getattr { path } | Request::Access { path } | Request::Commit { path } => self.head(&self.url_path(path)),
            Request::Lock { .. } | Request::Handle { .. } => Err("EOPNOTSUPP".into()), // refused before a trial (supports)
            Request::Lookup { dir, name } => {
                let mut p = self.url_path(dir);
                if !p.ends_with('/') {
                    p.push('/');
                }
                p.push_str(name);
                Self::status(self.request("HEAD", &p, "", Body::None, false))
            }
            Request::Read { path, offset, len, .. } => {
                let url = self.url_path(path);
                if (*offset == 0 && *len == WHOLE) || *len == 0 {
                    Self::status(self.request("GET", &url, "", Body::None, false))
                } else {
                    let last = offset.saturating_add(*len - 1);
                    let range = format!("Range: bytes={offset}-{last}\r\n");
                    match self.request("GET", &url, &range, Body::None, false) {
                        Ok(r) if r.status == 416 => Ok(0), // entirely past the end: an empty read, as pread gives
                        other => Self::status(other),
                    }
                }
            }
            Request::Write { path, offset, len, .. } => self.put(&self.url_path(path), offset + len),
            Request::Create { path } => self.put(&self.url_path(path), 0),
            Request::Remove { path } => Self::status(self.request("DELETE", &self.url_path(path), "", Body::None, false)),
            Request::Rmdir { path } => Self::status(self.request("DELETE", &self.dir_url(path), "", Body::None, false)),
            Request::Mkdir { path } => Self::status(self.request("MKCOL", &self.dir_url(path), "", Body::None, false)),
            Request::Rename { from, to } => {
                let dest = format!("Destination: {}\r\nOverwrite: T\r\n", self.url_path(to));
                Self::status(self.request("MOVE", &self.url_path(from), &dest, Body::None, false))
            }
            Request::Readdir { path, .. } => Self::status(self.request("GET", &self.dir_url(path), "", Body::None, false)),
            Request::Setattr { .. } | Request::Symlink { .. } | Request::Link { .. } | Request::Readlink { .. } => Err("EOPNOTSUPP".into()),
        }
    }

    fn store(&self) -> Option<&dyn FileStore> {
        Some(self)
    }

    fn store_mut(&mut self) -> Option<&mut dyn FileStore> {
        Some(self)
    }
}

impl FileStore for Http {
    fn enter_fileset(&mut self, id: &str, create: bool) -> anyhow::Result<()> {
        if let Some(d) = self.docroot.as_mut() {
            d.enter_fileset(id, create)?;
        } else if create {
            let url = format!("{}{id}/", self.base);
            let r = self.request("MKCOL", &url, "", Body::None, false).map_err(|e| self.fail("MKCOL", &url, e))?;
            if !(r.status < 300 || r.status == 405) {
                bail!("target {}: MKCOL {url}: HTTP {} (a read-only server? give its --docroot to build the file set there)", self.url, r.status);
            }
        }
        self.prefix = format!("{}{id}/", self.base);
        Ok(())
    }

    fn is_empty(&self) -> anyhow::Result<bool> {
        if let Some(d) = &self.docroot {
            return d.is_empty();
        }
        let r = self.request("PROPFIND", &self.base, "Depth: 1\r\n", Body::None, true).map_err(|e| self.fail("PROPFIND", &self.base, e))?;
        if r.status != 207 {
            bail!(
                "target {}: cannot tell whether {} is empty (PROPFIND answered HTTP {}); enable WebDAV PROPFIND or give --docroot",
                self.url,
                self.base,
                r.status
            );
        }
        // One <D:response> for the collection itself, one per member.
        let text = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
        Ok(text.matches(":response>").count() <= 2)
    }

    fn read_meta(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        if let Some(d) = &self.docroot {
            return d.read_meta(name);
        }
        let url = format!("{}{name}", self.base);
        let r = self.request("GET", &url, "", Body::None, true).map_err(|e| self.fail("GET", &url, e))?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 => Ok(None),
            s => bail!("target {}: GET {url}: HTTP {s}", self.url),
        }
    }

    fn write_meta(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        if let Some(d) = &self.docroot {
            return d.write_meta(name, bytes);
        }
        let url = format!("{}{name}", self.base);
        let r = self.request("PUT", &url, "", Body::Bytes(bytes), false).map_err(|e| self.fail("PUT", &url, e))?;
        if r.status >= 300 {
            bail!("target {}: PUT {url}: HTTP {} (a read-only server? give its --docroot to build the file set there)", self.url, r.status);
        }
        Ok(())
    }

    fn ensure_dir(&self, path: &str) -> anyhow::Result<()> {
        if let Some(d) = &self.docroot {
            return d.ensure_dir(path);
        }
        let url = self.dir_url(path);
        let r = self.request("MKCOL", &url, "", Body::None, false).map_err(|e| self.fail("MKCOL", &url, e))?;
        if r.status < 300 || r.status == 405 {
            Ok(()) // 405: it exists
        } else {
            bail!("target {}: MKCOL {url}: HTTP {}", self.url, r.status)
        }
    }

    fn ensure_file(&self, path: &str, size: u64, _content: &[u8]) -> anyhow::Result<()> {
        if let Some(d) = &self.docroot {
            return d.ensure_file(path, size, &self.content);
        }
        let url = self.url_path(path);
        let r = self.request("HEAD", &url, "", Body::None, false).map_err(|e| self.fail("HEAD", &url, e))?;
        if r.status == 200 && r.length == Some(size) {
            return Ok(());
        }
        self.put(&url, size).map(|_| ()).map_err(|e| self.fail("PUT", &url, e))
    }

    fn ensure_symlink(&self, path: &str, _points_to: &str) -> anyhow::Result<()> {
        bail!("target {}: HTTP has no symbolic links ({path}); use a workload without symlinks", self.url)
    }

    fn truncate(&self, path: &str, size: u64) -> anyhow::Result<()> {
        if let Some(d) = &self.docroot {
            return d.truncate(path, size);
        }
        // No partial PUT: the file is stored anew at that size, with the prepared content.
        let url = self.url_path(path);
        self.put(&url, size).map(|_| ()).map_err(|e| self.fail("PUT", &url, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_base() {
        assert_eq!(split_url("http://127.0.0.1:8080/").unwrap(), ("127.0.0.1:8080".into(), "/".into()));
        assert_eq!(split_url("http://example:81/a/b").unwrap(), ("example:81".into(), "/a/b/".into()));
        assert_eq!(split_url("http://h").unwrap(), ("h:80".into(), "/".into()));
        assert_eq!(split_url("http://[::1]:9/x/?q").unwrap(), ("[::1]:9".into(), "/x/".into()));
        assert_eq!(split_url("http://[::1]/").unwrap(), ("[::1]:80".into(), "/".into()));
        assert!(split_url("https://h/").is_err());
        assert!(split_url("http:///x").is_err());
    }

    /// A server's bytes, handed over `step` at a time, then end of stream; what is sent is dropped.
    struct Replies<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Replies<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(self.bytes.len()).min(out.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    impl Write for Replies<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The replies read from `bytes` until one fails or the connection cannot be reused.
    fn replies(bytes: &[u8], step: usize, method: &str) -> Vec<Result<u16, String>> {
        let mut conn = Conn { stream: Replies { bytes, step }, buf: vec![0u8; READ_BUF].into_boxed_slice(), start: 0, end: 0 };
        let mut got = Vec::new();
        loop {
            match conn.read_reply(method, true, Instant::now() + Duration::from_secs(1)) {
                Ok((r, reusable)) => {
                    assert!((100..600).contains(&r.status), "status {}", r.status);
                    assert_eq!(r.bytes, r.body.len() as u64);
                    got.push(Ok(r.status));
                    if !reusable {
                        return got;
                    }
                }
                Err((e, _)) => {
                    got.push(Err(e));
                    return got;
                }
            }
        }
    }

    #[test]
    fn a_reply_that_cannot_be_http_is_bad_as_soon_as_its_first_bytes_arrive() {
        // No blank line ever comes and the stream stays open: the first bytes must decide.
        assert_eq!(replies(b"SPAM\x00\xff spam spam", 4, "GET"), vec![Err("http_bad_response".into())]);
        assert_eq!(replies(b"HTTP/1.1 999999999999 OK\r\nContent-Length: 0\r\n\r\n", 64, "GET"), vec![Err("http_bad_response".into())]);
        for status in ["+20", "004", "600"] {
            let reply = format!("HTTP/1.1 {status} OK\r\n\r\n");
            assert_eq!(replies(reply.as_bytes(), 64, "GET"), vec![Err("http_bad_response".into())], "{status}");
        }
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.0 404\r\n\r\n";
        assert_eq!(replies(two, 3, "GET"), vec![Ok(200), Ok(404)]);
        assert_eq!(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 5, "GET"), vec![Ok(200), Err("http_eof".into())]);
    }

    #[test]
    #[ignore = "a fuzz target: scripts/fuzz.sh runs it"]
    fn fuzz_http_reply() {
        let seeds: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nTrailer: t\r\n\r\n",
            b"HTTP/1.0 404 Not Found\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 207 Multi-Status\r\nConnection: close\r\n\r\n<d:multistatus/>",
            b"HTTP/1.1 200 OK\r\nAllow: GET, PUT\r\nContent-Length: 0\r\n\r\n",
        ];
        crate::fuzz::fuzz("http reply", seeds, |input| {
            let step = 1 + input.first().copied().unwrap_or(0) as usize % 64;
            for method in ["GET", "HEAD"] {
                replies(input, step, method);
            }
        });
    }
}
