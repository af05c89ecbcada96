//! An HTTP/1.1 server (`http://host:port/base/`), one request in flight per keep-alive
//! connection. A trial's requests go through the event loop (evloop.rs): non-blocking
//! connections on one epoll set that the leading sender drives, so an open-loop run at
//! overload costs connections and buffers, not threads. Building and probing the file
//! set use blocking connections from a small pool. wire.rs holds the parser both share.
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

mod evloop;
mod tls;
mod wire;

use super::posix::{errno_name, Posix};
use super::{Completion, FileStore, Target};
use crate::op::{Op, Outcome, Request, WHOLE};
use crate::spec::GetattrMethod;
use crate::url::{split_url, TlsCheck};
use anyhow::{anyhow, bail, Context};
use evloop::{EventLoop, Job};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tls::{Stream, Tls};
pub use wire::Body;
use wire::{read_reply, Conn, Outgoing, Reply};

/// Most connections a trial opens (what the thread limit was when each request had a thread);
/// further requests wait for a free one. Also kept below the descriptor limit.
const MAX_CONNECTIONS: usize = 4096;

pub struct Http {
    url: String,
    addr: SocketAddr,
    /// https: how each connection is wrapped.
    tls: Option<Tls>,
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
    /// Blocking connections for `execute` (file-set building, restore, the probe).
    pool: Mutex<Vec<Conn<Stream>>>,
    /// A trial's requests, started and completed by the leading sender.
    events: Mutex<EventLoop>,
    content: Vec<u8>,
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

/// How a reply becomes an op's outcome.
#[derive(Clone, Copy)]
pub enum Then {
    /// 2xx and 304 succeed with the body's bytes; any other status is `http_NNN`.
    Status,
    /// A PUT of this many bytes.
    Put(u64),
    /// A Range GET: 416 (entirely past the end) is an empty read, as pread gives.
    Range,
}

impl Then {
    fn outcome(self, r: Result<Response, String>) -> Outcome {
        let r = r?;
        if matches!(self, Then::Range) && r.status == 416 {
            return Ok(0);
        }
        if (200..300).contains(&r.status) || r.status == 304 {
            Ok(if let Then::Put(size) = self { size } else { r.bytes })
        } else {
            Err(format!("http_{}", r.status))
        }
    }
}

/// One op as an HTTP request.
struct Call {
    method: &'static str,
    path: String,
    headers: String,
    body: Body<'static>,
    then: Then,
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
            // A TLS fault (tls.rs) carries its kind as the message.
            None => e.get_ref().map_or_else(|| format!("io_{:?}", e.kind()), |kind| kind.to_string()),
        },
    }
}

impl Http {
    pub fn open(url: &str, docroot: Option<&str>, timeout_s: f64, getattr: GetattrMethod, writable: Option<bool>) -> anyhow::Result<Http> {
        let (authority, base, check) = split_url(url)?;
        let addr = authority
            .to_socket_addrs()
            .with_context(|| format!("target {url}: cannot resolve {authority}"))?
            .next()
            .ok_or_else(|| anyhow!("target {url}: {authority} has no address"))?;
        let docroot = docroot.map(Posix::open).transpose()?;
        let timeout = Duration::from_secs_f64(timeout_s);
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(host, _)| host);
        let tls = match check {
            Some(TlsCheck::Ca(file)) => Some(Tls::new(host, Some(&file)).with_context(|| format!("target {url}"))?),
            Some(TlsCheck::Insecure) => {
                eprintln!("warning: target {url}: insecure=1, the server's certificate is not verified");
                Some(Tls::new(host, None).with_context(|| format!("target {url}"))?)
            }
            None => None,
        };
        let events = EventLoop::new(addr, tls.clone(), timeout, max_connections()).with_context(|| format!("target {url}: epoll"))?;
        let mut http = Http {
            url: url.to_string(),
            addr,
            tls,
            host: authority,
            prefix: base.clone(),
            base,
            docroot,
            timeout,
            conditional_getattr: getattr == GetattrMethod::Conditional,
            writable: false,
            pool: Mutex::new(Vec::new()),
            events: Mutex::new(events),
            content: crate::content::block(0),
        };
        // Reachable at all? One clear line now instead of every request failing later.
        // Writable when the server says it allows PUT (WebDAV), unless the spec says.
        let probe = http.request("OPTIONS", &http.base.clone(), "", Body::None, false).map_err(|e| anyhow!("target {url}: {e}"))?;
        let allows_put = probe.status < 300 && probe.allow.split(',').any(|m| m.trim().eq_ignore_ascii_case("PUT"));
        http.writable = writable.unwrap_or(allows_put);
        Ok(http)
    }

    fn connect(&self) -> Result<Conn<Stream>, String> {
        let tcp = TcpStream::connect_timeout(&self.addr, self.timeout).map_err(|e| io_kind(&e))?;
        let _ = tcp.set_nodelay(true);
        // Set once: a blocked read or write gives up after the timeout, and every read checks
        // the request's deadline, so no request outlives twice the timeout.
        let _ = tcp.set_read_timeout(Some(self.timeout));
        let _ = tcp.set_write_timeout(Some(self.timeout));
        let mut stream = match &self.tls {
            Some(tls) => tls.wrap(tcp).map_err(|e| io_kind(&e))?,
            None => Stream::Plain(tcp),
        };
        stream.handshake().map_err(|e| io_kind(&e))?;
        Ok(Conn::new(stream))
    }

    /// One blocking request on a pooled connection. A reused connection that the server closed
    /// while idle fails (closed or reset) before any response byte arrives: that request
    /// is retried once on a fresh connection, as every HTTP client does. A timeout is not.
    pub fn request(&self, method: &str, path: &str, headers: &str, body: Body, keep_body: bool) -> Result<Response, String> {
        let mut out = Outgoing::new(&self.host, method, path, headers, body, &self.content);
        let pooled = self.pool.lock().expect("pool lock").pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        match self.exchange(&mut conn, &mut out, method, keep_body) {
            Ok((response, keep)) => {
                if keep {
                    self.pool.lock().expect("pool lock").push(conn);
                }
                Ok(response)
            }
            Err((e, true)) if reused && matches!(e.as_str(), "http_eof" | "ECONNRESET" | "EPIPE" | "ECONNABORTED") => {
                drop(conn);
                let mut fresh = self.connect()?;
                out.rewind();
                let (response, keep) = self.exchange(&mut fresh, &mut out, method, keep_body).map_err(|(e, _)| e)?;
                if keep {
                    self.pool.lock().expect("pool lock").push(fresh);
                }
                Ok(response)
            }
            Err((e, _)) => Err(e),
        }
    }

    /// Send the request and read the whole reply. Err carries whether nothing at all came back.
    fn exchange(&self, conn: &mut Conn<Stream>, out: &mut Outgoing, method: &str, keep_body: bool) -> Result<(Response, bool), (String, bool)> {
        let deadline = Instant::now() + self.timeout;
        match out.write_to(&mut conn.stream, &self.content) {
            Ok(true) => {}
            Ok(false) => return Err(("ETIMEDOUT".into(), true)), // the write timeout
            Err(e) => return Err((io_kind(&e), true)),
        }
        read_reply(conn, Reply::new(method, keep_body), deadline)
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

    fn put(&self, url: &str, size: u64) -> Outcome {
        Then::Put(size).outcome(self.request("PUT", url, "", Body::Content(size), false))
    }

    fn fail(&self, what: &str, path: &str, e: String) -> anyhow::Error {
        anyhow!("target {}: {what} {path}: {e}", self.url)
    }

    /// The request an op makes, or the op's outcome when it has no HTTP form.
    fn call(&self, request: &Request) -> Result<Call, Outcome> {
        let call = |method, path, then| Call { method, path, headers: String::new(), body: Body::None, then };
        Ok(match request {
            Request::Null | Request::Fsstat | Request::Fsinfo | Request::Pathconf => call("HEAD", self.prefix.clone(), Then::Status),
            Request::Getattr { path } | Request::Access { path } | Request::Commit { path } if self.conditional_getattr => {
                Call { headers: "If-None-Match: *\r\n".into(), ..call("GET", self.url_path(path), Then::Status) }
            }
            Request::Getattr { path } | Request::Access { path } | Request::Commit { path } => call("HEAD", self.url_path(path), Then::Status),
            Request::Lookup { dir, name } => {
                let mut p = self.dir_url(dir);
                p.push_str(name);
                call("HEAD", p, Then::Status)
            }
            Request::Read { path, offset, len, .. } if (*offset == 0 && *len == WHOLE) || *len == 0 => call("GET", self.url_path(path), Then::Status),
            Request::Read { path, offset, len, .. } => {
                let last = offset.saturating_add(*len - 1);
                Call { headers: format!("Range: bytes={offset}-{last}\r\n"), ..call("GET", self.url_path(path), Then::Range) }
            }
            // HTTP has no partial PUT: the file is stored anew up to the end of the write.
            Request::Write { path, offset, len, .. } => Call { body: Body::Content(offset + len), ..call("PUT", self.url_path(path), Then::Put(offset + len)) },
            Request::Create { path } => Call { body: Body::Content(0), ..call("PUT", self.url_path(path), Then::Put(0)) },
            Request::Remove { path } => call("DELETE", self.url_path(path), Then::Status),
            Request::Rmdir { path } => call("DELETE", self.dir_url(path), Then::Status),
            Request::Mkdir { path } => call("MKCOL", self.dir_url(path), Then::Status),
            Request::Rename { from, to } => {
                Call { headers: format!("Destination: {}\r\nOverwrite: T\r\n", self.url_path(to)), ..call("MOVE", self.url_path(from), Then::Status) }
            }
            Request::Readdir { path, .. } => call("GET", self.dir_url(path), Then::Status),
            // Refused before a trial (supports).
            Request::Lock { .. }
            | Request::Handle { .. }
            | Request::Setattr { .. }
            | Request::Symlink { .. }
            | Request::Link { .. }
            | Request::Readlink { .. } => return Err(Err("EOPNOTSUPP".into())),
        })
    }
}

/// MAX_CONNECTIONS, or fewer when the descriptor limit is lower (leaving room for files and the log).
fn max_connections() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return MAX_CONNECTIONS;
    }
    (limit.rlim_cur as usize).saturating_sub(64).clamp(1, MAX_CONNECTIONS)
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
        match self.call(request) {
            Ok(c) => c.then.outcome(self.request(c.method, &c.path, &c.headers, c.body, false)),
            Err(outcome) => outcome,
        }
    }

    fn pipelines(&self) -> bool {
        true
    }

    fn completes_in_poll(&self) -> bool {
        true
    }

    fn start(&self, request: &Request, done: Completion) -> Result<(), Completion> {
        match self.call(request) {
            Ok(c) => {
                let out = Outgoing::new(&self.host, c.method, &c.path, &c.headers, c.body, &self.content);
                self.events.lock().expect("event loop lock").submit(Job::new(out, c.method, c.then, done), &self.content);
            }
            Err(outcome) => done(outcome, 0),
        }
        Ok(())
    }

    fn poll(&self, timeout: Duration) {
        self.events.lock().expect("event loop lock").poll(timeout, &self.content);
    }

    fn result_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let events = self.events.lock().expect("event loop lock");
        let mut fields = serde_json::Map::new();
        fields.insert("http_connections_max".into(), events.peak_open.into());
        fields.insert("http_waited_for_connection".into(), events.waited.into());
        fields
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
    use std::io::Read;

    /// A server's bytes, handed over `step` at a time, then end of stream.
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

    /// The replies read from `bytes` until one fails or the connection cannot be reused.
    fn replies(bytes: &[u8], step: usize, method: &str) -> Vec<Result<u16, String>> {
        let mut conn = Conn::new(Replies { bytes, step });
        let mut got = Vec::new();
        loop {
            match read_reply(&mut conn, Reply::new(method, true), Instant::now() + Duration::from_secs(1)) {
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
