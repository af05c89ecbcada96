//! SMB2 connections, pipelined: each connection negotiates, authenticates (NTLMv2) and
//! connects to the share once, then carries many requests in flight, each matched to
//! its response by message ID. A request is one message or a related compound (a CREATE,
//! QUERY_INFO and CLOSE go out as one), sent under the credits the server has granted.
//! One reader thread per connection reads responses in large chunks and completes the
//! request whose every part has come; nothing else runs per request.

use super::ntlm;
use super::wire::{self, Header, Negotiated, Req};
use crate::target::inflight::InflightCap;
use rand::Rng;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A dead connection is re-dialled at most this often, so a dead server costs little.
const REDIAL_EVERY: Duration = Duration::from_millis(500);
/// How often the reader looks for requests whose time is up.
const EXPIRE_EVERY: Duration = Duration::from_millis(50);
/// Credits the client asks for until it holds this many: enough for any load one
/// connection carries, within Samba's default limit of 8192.
const CREDIT_GOAL: u32 = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmbError {
    /// The server answered with this NTSTATUS.
    Status(u32),
    Timeout,
    Connection(String),
    Malformed(String),
    /// The server has granted no credit for another request.
    NoCredits,
}

impl SmbError {
    /// The error kind recorded for an op.
    pub fn kind(&self) -> String {
        match self {
            SmbError::Status(s) => wire::status_name(*s),
            SmbError::Timeout => "ETIMEDOUT".into(),
            SmbError::Connection(_) => "SMB_CONNECTION".into(),
            SmbError::Malformed(_) => "SMB_MALFORMED_REPLY".into(),
            SmbError::NoCredits => "SMB_CREDITS_EXHAUSTED".into(),
        }
    }
}

impl std::fmt::Display for SmbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmbError::Status(s) => write!(f, "{}", wire::status_name(*s)),
            SmbError::Timeout => write!(f, "no reply (timed out)"),
            SmbError::Connection(e) => write!(f, "connection: {e}"),
            SmbError::Malformed(e) => write!(f, "malformed reply: {e}"),
            SmbError::NoCredits => write!(f, "the server granted no credit for another request"),
        }
    }
}

pub type Res<T> = Result<T, SmbError>;

/// The responses of a request's messages, in order (each a whole message, header first).
pub type Replies = Vec<Vec<u8>>;
/// What an asynchronous request's completion receives (on the connection's reader thread).
pub type Callback = Box<dyn FnOnce(Res<Replies>) + Send>;

/// Who or what to connect as.
#[derive(Clone, Debug)]
pub struct Login {
    pub share: String,
    pub user: String,
    pub password: String,
    pub domain: String,
    pub dialects: Vec<u16>,
    pub timeout: Duration,
}

enum Waiter {
    Thread(Arc<Slot>),
    Async(Callback),
}

struct Slot {
    reply: Mutex<Option<Res<Replies>>>,
    waiter: Thread,
}

struct Call {
    parts: Vec<Option<Vec<u8>>>,
    /// The first message ID of each part.
    mids: Vec<u64>,
    deadline: Instant,
    waiter: Waiter,
}

impl Call {
    fn finish(self, r: Res<Replies>) {
        match self.waiter {
            Waiter::Thread(s) => {
                *s.reply.lock().expect("slot lock") = Some(r);
                s.waiter.unpark();
            }
            Waiter::Async(cb) => cb(r),
        }
    }
}

enum Entry {
    Call(Call),
    /// A later part of the compound whose first message ID this is.
    Part(u64),
}

/// Message IDs, credits and the messages waiting for `flush`, under one lock: IDs go out in order.
struct Outbox {
    next_mid: u64,
    credits: u32,
    queued: Vec<u8>,
}

pub struct Live {
    writer: Mutex<TcpStream>,
    send: Mutex<Outbox>,
    pending: Mutex<HashMap<u64, Entry>>,
    dead: AtomicBool,
    session: u64,
    tree: u32,
    pub negotiated: Negotiated,
    /// Bumped on every new connection: a cached FileId of an older one is worthless.
    pub generation: u64,
}

impl Live {
    fn kill(&self, why: &SmbError) {
        self.dead.store(true, Relaxed);
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(Shutdown::Both);
        }
        let calls: Vec<Call> = self
            .pending
            .lock()
            .map(|mut p| {
                p.drain()
                    .filter_map(|(_, e)| match e {
                        Entry::Call(c) => Some(c),
                        Entry::Part(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        for c in calls {
            c.finish(Err(why.clone()));
        }
    }

    fn expire(&self, now: Instant) {
        let expired: Vec<Call> = {
            let mut pending = self.pending.lock().expect("pending lock");
            let due: Vec<u64> = pending.iter().filter_map(|(m, e)| matches!(e, Entry::Call(c) if c.deadline <= now).then_some(*m)).collect();
            due.into_iter()
                .filter_map(|m| match pending.remove(&m) {
                    Some(Entry::Call(c)) => {
                        for later in &c.mids[1..] {
                            pending.remove(later);
                        }
                        Some(c)
                    }
                    _ => None,
                })
                .collect()
        };
        for c in expired {
            c.finish(Err(SmbError::Timeout));
        }
    }

    /// Queue a request (one message or a related compound): message IDs and credits are
    /// taken now, the bytes go out with the next `flush`.
    fn queue(&self, reqs: &[Req], timeout: Duration, waiter: Waiter) -> Result<(), (SmbError, Waiter)> {
        let charge: u32 = reqs.iter().map(|r| r.charge as u32).sum();
        let mut send = self.send.lock().expect("send lock");
        if send.credits < charge {
            return Err((SmbError::NoCredits, waiter));
        }
        send.credits -= charge;
        let ask = if send.credits < CREDIT_GOAL { 16 } else { 0 };
        let mut mids = Vec::with_capacity(reqs.len());
        let start = send.queued.len();
        send.queued.extend_from_slice(&[0; 4]);
        let mut last_at = 0;
        for (i, r) in reqs.iter().enumerate() {
            if i > 0 {
                // Each message of a compound starts 8-byte aligned; the one before points at it.
                while !(send.queued.len() - start - 4).is_multiple_of(8) {
                    send.queued.push(0);
                }
                let next = (send.queued.len() - last_at) as u32;
                send.queued[last_at + 20..last_at + 24].copy_from_slice(&next.to_le_bytes());
            }
            last_at = send.queued.len();
            let mid = send.next_mid;
            send.next_mid += r.charge.max(1) as u64;
            mids.push(mid);
            let flags = if i > 0 { wire::FLAG_RELATED } else { 0 };
            wire::put_header(&mut send.queued, r.command, r.charge, r.charge + ask, flags, mid, self.tree, self.session);
            send.queued.extend_from_slice(&r.body);
        }
        let len = (send.queued.len() - start - 4) as u32;
        send.queued[start..start + 4].copy_from_slice(&len.to_be_bytes());
        let first = mids[0];
        let call = Call { parts: vec![None; reqs.len()], mids: mids.clone(), deadline: Instant::now() + timeout, waiter };
        let mut pending = self.pending.lock().expect("pending lock");
        for m in &mids[1..] {
            pending.insert(*m, Entry::Part(first));
        }
        pending.insert(first, Entry::Call(call));
        Ok(())
    }

    fn flush(&self) {
        let mut w = self.writer.lock().expect("writer lock");
        let out = std::mem::take(&mut self.send.lock().expect("send lock").queued);
        if out.is_empty() {
            return;
        }
        let sent = w.write_all(&out);
        drop(w);
        let mut send = self.send.lock().expect("send lock");
        if send.queued.is_empty() {
            let mut out = out;
            out.clear();
            send.queued = out; // keep the allocation for the next batch
        }
        drop(send);
        if let Err(e) = sent {
            self.kill(&SmbError::Connection(format!("send: {e}")));
        }
    }

    /// One response message: its credits, then its place in the request it answers.
    fn take(&self, msg: &[u8], h: &Header, stray: &AtomicU64) -> Option<Call> {
        if h.credits > 0 {
            self.send.lock().expect("send lock").credits += h.credits as u32;
        }
        if h.flags & wire::FLAG_ASYNC != 0 && h.status == wire::STATUS_PENDING {
            return None; // an interim response: the final one follows
        }
        let mut pending = self.pending.lock().expect("pending lock");
        let first = match pending.get(&h.mid) {
            Some(Entry::Part(f)) => *f,
            Some(Entry::Call(_)) => h.mid,
            None => {
                stray.fetch_add(1, Relaxed);
                return None;
            }
        };
        let Some(Entry::Call(call)) = pending.get_mut(&first) else {
            stray.fetch_add(1, Relaxed);
            return None;
        };
        let i = call.mids.iter().position(|m| *m == h.mid).expect("a part's ID is among its call's");
        call.parts[i] = Some(msg.to_vec());
        if call.parts.iter().any(Option::is_none) {
            return None;
        }
        let Some(Entry::Call(call)) = pending.remove(&first) else { unreachable!("just found") };
        for m in &call.mids[1..] {
            pending.remove(m);
        }
        Some(call)
    }
}

struct Conn {
    live: Mutex<(Option<Arc<Live>>, Option<Instant>)>,
}

pub struct Client {
    pub addr: SocketAddr,
    login: Login,
    conns: Vec<Conn>,
    next: AtomicUsize,
    generations: AtomicU64,
    max_outstanding: Option<usize>,
    inflight: InflightCap,
    pub stray_replies: Arc<AtomicU64>,
    pub reconnects: AtomicU64,
}

fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = (msg.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

fn read_frame(s: &mut TcpStream) -> Res<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(|e| SmbError::Connection(format!("read: {e}")))?;
    let n = u32::from_be_bytes(len) as usize;
    if len[0] != 0 || n > wire::MAX_FRAME {
        return Err(SmbError::Malformed(format!("frame of {n} bytes")));
    }
    let mut msg = vec![0; n];
    s.read_exact(&mut msg).map_err(|e| SmbError::Connection(format!("read: {e}")))?;
    Ok(msg)
}

/// One request and its response on a connection nobody else uses yet (the handshake).
fn exchange(s: &mut TcpStream, req: &Req, mid: u64, tree: u32, session: u64) -> Res<(Header, Vec<u8>)> {
    let mut msg = Vec::with_capacity(wire::HEADER + req.body.len());
    wire::put_header(&mut msg, req.command, if mid == 0 { 0 } else { 1 }, 64, 0, mid, tree, session);
    msg.extend_from_slice(&req.body);
    s.write_all(&frame(&msg)).map_err(|e| SmbError::Connection(format!("send: {e}")))?;
    loop {
        let reply = read_frame(s)?;
        let h = wire::parse_header(&reply).map_err(SmbError::Malformed)?;
        if h.flags & wire::FLAG_ASYNC != 0 && h.status == wire::STATUS_PENDING {
            continue;
        }
        return Ok((h, reply));
    }
}

/// How a connection's set-up failed: the step, for the user's one-line error.
#[derive(Debug)]
pub enum SetupError {
    Dialect(String),
    Logon(String),
    Share(u32),
    Other(String),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Dialect(e) | SetupError::Logon(e) | SetupError::Other(e) => f.write_str(e),
            SetupError::Share(s) => write!(f, "TREE_CONNECT: {}", wire::status_name(*s)),
        }
    }
}

/// A generator for the client GUID and NTLM client challenge, seeded afresh per connection.
fn fresh_rng() -> rand_pcg::Pcg64 {
    use rand::SeedableRng;
    static DIALS: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    rand_pcg::Pcg64::seed_from_u64(now ^ (std::process::id() as u64) << 32 ^ DIALS.fetch_add(1, Relaxed))
}

/// NEGOTIATE, SESSION_SETUP (two legs of NTLMSSP) and TREE_CONNECT on a fresh connection:
/// (negotiated, session, tree, credits granted, next message ID).
fn handshake(s: &mut TcpStream, login: &Login, ip: &str) -> Result<(Negotiated, u64, u32, u32, u64), SetupError> {
    let other = |what: &str, e: SmbError| SetupError::Other(format!("{what}: {e}"));
    let offered = login.dialects.iter().map(|d| wire::dialect_name(*d)).collect::<Vec<_>>().join(", ");
    let mut rng = fresh_rng();
    let guid: [u8; 16] = rng.random();
    let (h, reply) = exchange(s, &wire::negotiate(&login.dialects, guid), 0, 0, 0).map_err(|e| match e {
        SmbError::Connection(_) => SetupError::Dialect(format!("NEGOTIATE: the server closed the connection when offered SMB {offered}")),
        e => other("NEGOTIATE", e),
    })?;
    if h.status != wire::STATUS_SUCCESS {
        return Err(SetupError::Dialect(format!("NEGOTIATE: the server refused SMB {offered} ({})", wire::status_name(h.status))));
    }
    let neg = wire::parse_negotiate(&reply).map_err(|e| other("NEGOTIATE", SmbError::Malformed(e)))?;
    if !login.dialects.contains(&neg.dialect) {
        return Err(SetupError::Dialect(format!("NEGOTIATE: the server chose SMB {} although offered SMB {offered}", wire::dialect_name(neg.dialect))));
    }
    let mut credits = h.credits as u32;
    let (h, reply) = exchange(s, &wire::session_setup(&ntlm::negotiate_message()), 1, 0, 0).map_err(|e| other("SESSION_SETUP", e))?;
    credits += h.credits as u32;
    if h.status != wire::STATUS_MORE_PROCESSING_REQUIRED {
        return Err(SetupError::Logon(format!("SESSION_SETUP (NTLMSSP negotiate): {}", wire::status_name(h.status))));
    }
    let session = h.session;
    let token = wire::parse_session_setup(&reply).map_err(|e| other("SESSION_SETUP", SmbError::Malformed(e)))?;
    let challenge = ntlm::parse_challenge(&token).map_err(SetupError::Other)?;
    let auth = ntlm::authenticate_message(&challenge, &login.user, &login.password, &login.domain, rng.random(), wire::filetime_now());
    let (h, _) = exchange(s, &wire::session_setup(&auth), 2, 0, session).map_err(|e| other("SESSION_SETUP", e))?;
    credits += h.credits as u32;
    if h.status != wire::STATUS_SUCCESS {
        let who = if login.domain.is_empty() { login.user.clone() } else { format!("{}\\{}", login.domain, login.user) };
        return Err(SetupError::Logon(format!("SESSION_SETUP as {who}: {} (wrong user name or password?)", wire::status_name(h.status))));
    }
    let unc = format!("\\\\{ip}\\{}", login.share);
    let (h, _) = exchange(s, &wire::tree_connect(&unc), 3, 0, session).map_err(|e| other("TREE_CONNECT", e))?;
    credits += h.credits as u32;
    if h.status != wire::STATUS_SUCCESS {
        return Err(SetupError::Share(h.status));
    }
    // Each handshake message cost one credit, except NEGOTIATE.
    Ok((neg, session, h.tree, credits.saturating_sub(3), 4))
}

impl Client {
    pub fn new(addr: SocketAddr, login: Login, conns: usize, max_outstanding: Option<usize>) -> Client {
        Client {
            addr,
            login,
            conns: (0..conns.max(1)).map(|_| Conn { live: Mutex::new((None, None)) }).collect(),
            next: AtomicUsize::new(0),
            generations: AtomicU64::new(0),
            max_outstanding,
            inflight: InflightCap::new(max_outstanding),
            stray_replies: Arc::new(AtomicU64::new(0)),
            reconnects: AtomicU64::new(0),
        }
    }

    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Whether `call_async` may be used: a cap on requests in flight needs blocking callers.
    pub fn pipelines(&self) -> bool {
        self.max_outstanding.is_none()
    }

    /// Set up every connection now, so that a refused login or share is one clear error.
    pub fn connect_all(&self) -> Result<Arc<Live>, SetupError> {
        let mut first = None;
        for i in 0..self.conns.len() {
            let l = self.dial(i, true)?;
            first.get_or_insert(l);
        }
        Ok(first.expect("at least one connection"))
    }

    fn dial(&self, index: usize, force: bool) -> Result<Arc<Live>, SetupError> {
        let conn = &self.conns[index];
        let mut g = conn.live.lock().expect("conn lock");
        if let Some(l) = &g.0 {
            if !l.dead.load(Relaxed) {
                return Ok(l.clone());
            }
        }
        if let Some(last) = g.1 {
            if !force && last.elapsed() < REDIAL_EVERY {
                return Err(SetupError::Other(format!("{} is down (redial pending)", self.addr)));
            }
            self.reconnects.fetch_add(1, Relaxed);
        }
        g.1 = Some(Instant::now());
        let connect_timeout = self.login.timeout.clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut stream = TcpStream::connect_timeout(&self.addr, connect_timeout).map_err(|e| SetupError::Other(format!("connect to {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(self.login.timeout));
        let (negotiated, session, tree, credits, next_mid) = handshake(&mut stream, &self.login, &self.addr.ip().to_string())?;
        let reader = stream.try_clone().map_err(|e| SetupError::Other(e.to_string()))?;
        let live = Arc::new(Live {
            writer: Mutex::new(stream),
            send: Mutex::new(Outbox { next_mid, credits, queued: Vec::with_capacity(64 * 1024) }),
            pending: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            session,
            tree,
            negotiated,
            generation: self.generations.fetch_add(1, Relaxed) + 1,
        });
        let (l2, stray) = (live.clone(), self.stray_replies.clone());
        std::thread::Builder::new()
            .name("pb-smb-reader".into())
            .stack_size(256 * 1024)
            .spawn(move || read_responses(l2, reader, stray))
            .map_err(|e| SetupError::Other(format!("reader thread: {e}")))?;
        g.0 = Some(live.clone());
        Ok(live)
    }

    /// The connection for a path (the same one every time, so that its open handles are
    /// there), or the next in turn for a request without one.
    pub fn pick(&self, path: Option<&str>) -> Res<(usize, Arc<Live>)> {
        let n = self.conns.len();
        let index = match path {
            _ if n == 1 => 0,
            Some(p) => (xxhash_rust::xxh3::xxh3_64(p.as_bytes()) % n as u64) as usize,
            None => self.next.fetch_add(1, Relaxed) % n,
        };
        self.dial(index, false).map(|l| (index, l)).map_err(|e| SmbError::Connection(e.to_string()))
    }

    /// Queue a request and return at once; `flush` sends it. `cb` gets its responses, a
    /// timeout or a connection error.
    pub fn call_async(&self, live: &Live, reqs: &[Req], cb: Callback) {
        if let Err((e, Waiter::Async(cb))) = live.queue(reqs, self.login.timeout, Waiter::Async(cb)) {
            cb(Err(e))
        }
    }

    /// Send every queued request: one write per connection.
    pub fn flush(&self) {
        for c in &self.conns {
            let live = c.live.lock().expect("conn lock").0.clone();
            if let Some(l) = live {
                l.flush();
            }
        }
    }

    /// A request, waiting for its responses.
    pub fn call(&self, live: &Live, reqs: &[Req]) -> Res<Replies> {
        let _permit = self.inflight.acquire();
        let slot = Arc::new(Slot { reply: Mutex::new(None), waiter: std::thread::current() });
        if let Err((e, _)) = live.queue(reqs, self.login.timeout, Waiter::Thread(slot.clone())) {
            return Err(e);
        }
        live.flush();
        let deadline = Instant::now() + self.login.timeout + EXPIRE_EVERY * 2;
        loop {
            if let Some(r) = slot.reply.lock().expect("slot lock").take() {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                // The reader expires it; this bound holds even if the reader is stuck.
                return Err(SmbError::Timeout);
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// Log off and close every connection; waiting callers get a connection error.
    pub fn shutdown(&self) {
        for c in &self.conns {
            if let Some(l) = c.live.lock().expect("conn lock").0.take() {
                if !l.dead.load(Relaxed) {
                    let _ = l.queue(&[wire::logoff()], Duration::from_millis(200), Waiter::Async(Box::new(|_| {})));
                    l.flush();
                }
                l.kill(&SmbError::Connection("client shut down".into()));
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Split a frame into its messages (a compound response chains them by NextCommand).
fn messages(frame: &[u8]) -> Result<Vec<(Header, &[u8])>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let rest = &frame[at..];
        let h = wire::parse_header(rest)?;
        let len = if h.next == 0 { rest.len() } else { h.next as usize };
        if len < wire::HEADER || len > rest.len() {
            return Err(format!("compound NextCommand {} in a {}-byte frame", h.next, rest.len()));
        }
        out.push((h, &rest[..len]));
        if h.next == 0 {
            return Ok(out);
        }
        at += len;
    }
}

/// The connection's reader: frames in large reads, each response to its request.
fn read_responses(live: Arc<Live>, mut stream: TcpStream, stray: Arc<AtomicU64>) {
    let _ = stream.set_read_timeout(Some(EXPIRE_EVERY));
    let mut buf = vec![0u8; 256 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    let mut last_expire = Instant::now();
    let why = 'outer: loop {
        if start > 0 && (start == end || end == buf.len()) {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        if end == buf.len() {
            let grown = (buf.len() * 2).min(wire::MAX_FRAME + 4);
            buf.resize(grown.max(buf.len() + 4096), 0);
        }
        match stream.read(&mut buf[end..]) {
            Ok(0) => break SmbError::Connection("connection closed by the server".into()),
            Ok(n) => end += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(e) => break SmbError::Connection(format!("connection lost: {e}")),
        }
        let mut done = Vec::new();
        while end - start >= 4 {
            let b = &buf[start..end];
            let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if b[0] != 0 || n > wire::MAX_FRAME {
                break 'outer SmbError::Malformed(format!("frame of {n} bytes"));
            }
            if b.len() < 4 + n {
                break;
            }
            match messages(&b[4..4 + n]) {
                Ok(msgs) => {
                    for (h, m) in msgs {
                        if let Some(c) = live.take(m, &h, &stray) {
                            done.push(c);
                        }
                    }
                }
                Err(e) => break 'outer SmbError::Malformed(e),
            }
            start += 4 + n;
        }
        for mut c in done {
            let parts = std::mem::take(&mut c.parts).into_iter().map(Option::unwrap_or_default).collect();
            c.finish(Ok(parts));
        }
        if live.dead.load(Relaxed) {
            break SmbError::Connection("connection closed".into());
        }
        let now = Instant::now();
        if now.duration_since(last_expire) >= EXPIRE_EVERY {
            last_expire = now;
            live.expire(now);
        }
    };
    live.kill(&why);
}
