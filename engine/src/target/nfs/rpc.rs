//! ONC-RPC over TCP (RFC 5531) with record marking, pipelined: many calls in
//! flight on one connection, each matched to its reply by XID. Callers block in
//! `call`; one reader thread per connection reads replies in large chunks and
//! hands each to the thread that waits for it. Replies with an XID that nobody
//! waits for (late replies to calls that timed out, garbage) are counted and dropped.

use super::xdr::{Dec, Enc};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A record larger than this is a protocol error: the stream cannot be trusted after it.
pub const MAX_RECORD: usize = 16 << 20;
const LAST_FRAGMENT: u32 = 0x8000_0000;
/// A dead connection is re-dialled at most this often, so a dead server costs little.
const REDIAL_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// No reply after every retransmission.
    Timeout,
    /// Could not connect, or the connection broke.
    Connection(String),
    /// The server refused the call (MSG_DENIED, PROG_UNAVAIL, GARBAGE_ARGS, ...).
    Rejected(String),
    /// The reply could not be decoded.
    Malformed(String),
}

impl RpcError {
    /// The error kind recorded for an op.
    pub fn kind(&self) -> String {
        match self {
            RpcError::Timeout => "ETIMEDOUT".into(),
            RpcError::Connection(_) => "RPC_CONNECTION".into(),
            RpcError::Rejected(why) => format!("RPC_{}", why.split(' ').next().unwrap_or("REJECTED")),
            RpcError::Malformed(_) => "RPC_MALFORMED_REPLY".into(),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcError::Timeout => write!(f, "no reply (timed out after retransmissions)"),
            RpcError::Connection(e) => write!(f, "connection: {e}"),
            RpcError::Rejected(e) => write!(f, "rejected: {e}"),
            RpcError::Malformed(e) => write!(f, "malformed reply: {e}"),
        }
    }
}

thread_local! {
    /// Retransmissions made by this thread's calls since the last `take_retransmissions`.
    static RETRANSMISSIONS: Cell<u32> = const { Cell::new(0) };
}

pub fn take_retransmissions() -> u32 {
    RETRANSMISSIONS.with(|c| c.replace(0))
}

/// A reply whose header was accepted: the results start at `at`.
pub struct Reply {
    pub buf: Vec<u8>,
    pub at: usize,
}

impl Reply {
    pub fn dec(&self) -> Dec<'_> {
        let mut d = Dec::new(&self.buf);
        d.at = self.at;
        d
    }
}

#[derive(Clone, Debug)]
pub struct CallOptions {
    pub timeout: Duration,
    pub retrans: u32,
    pub uid: u32,
    pub gid: u32,
    pub max_outstanding: Option<usize>,
    pub connect_timeout: Duration,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions { timeout: Duration::from_secs(5), retrans: 2, uid: 0, gid: 0, max_outstanding: None, connect_timeout: Duration::from_secs(5) }
    }
}

struct Slot {
    reply: Mutex<Option<Result<Vec<u8>, RpcError>>>,
    waiter: Thread,
}

struct Live {
    writer: Mutex<TcpStream>,
    pending: Mutex<HashMap<u32, Arc<Slot>>>,
    dead: AtomicBool,
    xid: AtomicU32,
}

impl Live {
    fn kill(&self, why: &RpcError) {
        self.dead.store(true, Relaxed);
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(Shutdown::Both);
        }
        let slots: Vec<Arc<Slot>> = self.pending.lock().map(|mut p| p.drain().map(|(_, s)| s).collect()).unwrap_or_default();
        for s in slots {
            *s.reply.lock().expect("slot lock") = Some(Err(why.clone()));
            s.waiter.unpark();
        }
    }
}

struct Conn {
    live: Mutex<(Option<Arc<Live>>, Option<Instant>)>,
}

/// Counters of the transport itself (not per op).
#[derive(Default)]
pub struct TransportStats {
    pub stray_replies: AtomicU64,
    pub bad_records: AtomicU64,
    pub reconnects: AtomicU64,
}

pub struct RpcClient {
    pub addr: SocketAddr,
    prog: u32,
    vers: u32,
    /// Encoded credential and verifier (AUTH_SYS, AUTH_NONE).
    auth: Vec<u8>,
    conns: Vec<Conn>,
    next: AtomicUsize,
    opts: CallOptions,
    inflight: Mutex<usize>,
    inflight_cv: Condvar,
    pub stats: Arc<TransportStats>,
    xid_seed: u32,
}

fn auth_sys(uid: u32, gid: u32) -> Vec<u8> {
    let mut body = Vec::new();
    let stamp = std::process::id();
    Enc(&mut body).u32(stamp).str("peakbench").u32(uid).u32(gid).u32(1).u32(gid);
    let mut v = Vec::new();
    Enc(&mut v).u32(1).opaque(&body).u32(0).u32(0); // AUTH_SYS cred, AUTH_NONE verifier
    v
}

impl RpcClient {
    /// A client for one program; connects lazily unless `connect_now`.
    pub fn new(addr: SocketAddr, prog: u32, vers: u32, conns: usize, opts: CallOptions) -> RpcClient {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(1)
            ^ std::process::id().rotate_left(16);
        RpcClient {
            addr,
            prog,
            vers,
            auth: auth_sys(opts.uid, opts.gid),
            conns: (0..conns.max(1)).map(|_| Conn { live: Mutex::new((None, None)) }).collect(),
            next: AtomicUsize::new(0),
            opts,
            inflight: Mutex::new(0),
            inflight_cv: Condvar::new(),
            stats: Arc::new(TransportStats::default()),
            xid_seed: seed,
        }
    }

    /// Dial every connection now, so that an unreachable server is one clear error.
    pub fn connect_all(&self) -> Result<(), RpcError> {
        for (i, c) in self.conns.iter().enumerate() {
            self.live(c, i, true)?;
        }
        Ok(())
    }

    fn live(&self, conn: &Conn, index: usize, force: bool) -> Result<Arc<Live>, RpcError> {
        let mut g = conn.live.lock().expect("conn lock");
        if let Some(l) = &g.0 {
            if !l.dead.load(Relaxed) {
                return Ok(l.clone());
            }
        }
        if let Some(last) = g.1 {
            if !force && last.elapsed() < REDIAL_EVERY {
                return Err(RpcError::Connection(format!("{} is down (redial pending)", self.addr)));
            }
            self.stats.reconnects.fetch_add(1, Relaxed);
        }
        g.1 = Some(Instant::now());
        let stream = TcpStream::connect_timeout(&self.addr, self.opts.connect_timeout)
            .map_err(|e| RpcError::Connection(format!("connect to {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone().map_err(|e| RpcError::Connection(e.to_string()))?;
        let live = Arc::new(Live {
            writer: Mutex::new(stream),
            pending: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            xid: AtomicU32::new(self.xid_seed.wrapping_add((index as u32) << 24)),
        });
        let (l2, stats) = (live.clone(), self.stats.clone());
        std::thread::Builder::new()
            .name("pb-rpc-reader".into())
            .stack_size(256 * 1024)
            .spawn(move || read_replies(l2, reader, stats))
            .map_err(|e| RpcError::Connection(format!("reader thread: {e}")))?;
        g.0 = Some(live.clone());
        Ok(live)
    }

    /// One call: `args` appends the procedure's arguments. Blocks until the reply,
    /// retransmitting (same XID) after each timeout.
    pub fn call(&self, proc_: u32, args: impl FnOnce(&mut Enc)) -> Result<Reply, RpcError> {
        let index = if self.conns.len() == 1 { 0 } else { self.next.fetch_add(1, Relaxed) % self.conns.len() };
        let live = self.live(&self.conns[index], index, false)?;
        let xid = live.xid.fetch_add(1, Relaxed);
        let mut rec = Vec::with_capacity(256);
        {
            let mut e = Enc(&mut rec);
            e.u32(0).u32(xid).u32(0).u32(2).u32(self.prog).u32(self.vers).u32(proc_);
            e.0.extend_from_slice(&self.auth);
            args(&mut e);
        }
        let len = (rec.len() - 4) as u32;
        rec[..4].copy_from_slice(&(LAST_FRAGMENT | len).to_be_bytes());

        let _permit = self.acquire();
        let slot = Arc::new(Slot { reply: Mutex::new(None), waiter: std::thread::current() });
        live.pending.lock().expect("pending lock").insert(xid, slot.clone());
        let mut tries_left = self.opts.retrans;
        let result = loop {
            if let Err(e) = live.writer.lock().expect("writer lock").write_all(&rec) {
                let err = RpcError::Connection(format!("send to {}: {e}", self.addr));
                live.kill(&err);
                break Err(err);
            }
            let deadline = Instant::now() + self.opts.timeout;
            let got = loop {
                if let Some(r) = slot.reply.lock().expect("slot lock").take() {
                    break Some(r);
                }
                let now = Instant::now();
                if now >= deadline {
                    break None;
                }
                std::thread::park_timeout(deadline - now);
            };
            match got {
                Some(r) => break r,
                None if tries_left > 0 && !live.dead.load(Relaxed) => {
                    tries_left -= 1;
                    RETRANSMISSIONS.with(|c| c.set(c.get() + 1));
                }
                None => {
                    live.pending.lock().expect("pending lock").remove(&xid);
                    // The reply may have landed between the last look and the removal.
                    break slot.reply.lock().expect("slot lock").take().unwrap_or(Err(RpcError::Timeout));
                }
            }
        };
        let buf = result?;
        parse_reply(buf)
    }

    fn acquire(&self) -> Option<Permit<'_>> {
        let cap = self.opts.max_outstanding?;
        let mut n = self.inflight.lock().expect("inflight lock");
        while *n >= cap {
            n = self.inflight_cv.wait(n).expect("inflight lock");
        }
        *n += 1;
        Some(Permit(self))
    }

    /// Close every connection; blocked callers get a connection error.
    pub fn shutdown(&self) {
        for c in &self.conns {
            if let Some(l) = c.live.lock().expect("conn lock").0.take() {
                l.kill(&RpcError::Connection("client shut down".into()));
            }
        }
    }
}

impl Drop for RpcClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Permit<'a>(&'a RpcClient);
impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.inflight.lock().expect("inflight lock") -= 1;
        self.0.inflight_cv.notify_one();
    }
}

/// Check a reply's header; the results follow it.
pub fn parse_reply(buf: Vec<u8>) -> Result<Reply, RpcError> {
    let bad = |e: super::xdr::XdrError| RpcError::Malformed(e.to_string());
    let mut d = Dec::new(&buf);
    let _xid = d.u32().map_err(bad)?;
    if d.u32().map_err(bad)? != 1 {
        return Err(RpcError::Malformed("not a REPLY message".into()));
    }
    match d.u32().map_err(bad)? {
        0 => {
            let _flavor = d.u32().map_err(bad)?;
            d.opaque(400).map_err(bad)?;
            match d.u32().map_err(bad)? {
                0 => {
                    let at = d.at;
                    Ok(Reply { buf, at })
                }
                1 => Err(RpcError::Rejected("PROG_UNAVAIL program not available".into())),
                2 => {
                    let (lo, hi) = (d.u32().unwrap_or(0), d.u32().unwrap_or(0));
                    Err(RpcError::Rejected(format!("PROG_MISMATCH versions {lo}..{hi} only")))
                }
                3 => Err(RpcError::Rejected("PROC_UNAVAIL procedure not available".into())),
                4 => Err(RpcError::Rejected("GARBAGE_ARGS the server could not decode the arguments".into())),
                5 => Err(RpcError::Rejected("SYSTEM_ERR server system error".into())),
                n => Err(RpcError::Malformed(format!("accept status {n}"))),
            }
        }
        1 => match d.u32().map_err(bad)? {
            0 => Err(RpcError::Rejected("RPC_MISMATCH RPC version not supported".into())),
            1 => {
                let why = match d.u32().unwrap_or(0) {
                    1 => "bad credential",
                    2 => "credential rejected",
                    3 => "bad verifier",
                    4 => "verifier rejected",
                    5 => "credential too weak",
                    _ => "authentication failed",
                };
                Err(RpcError::Rejected(format!("AUTH_ERROR {why}")))
            }
            n => Err(RpcError::Malformed(format!("reject status {n}"))),
        },
        n => Err(RpcError::Malformed(format!("reply status {n}"))),
    }
}

/// Split a byte stream into records; `Err` on a record the stream cannot recover from.
pub fn read_record<R: Read>(r: &mut R, max: usize) -> std::io::Result<Result<Vec<u8>, String>> {
    let mut rec = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        r.read_exact(&mut mark)?;
        let m = u32::from_be_bytes(mark);
        let len = (m & !LAST_FRAGMENT) as usize;
        if rec.len() + len > max {
            return Ok(Err(format!("record of more than {max} bytes")));
        }
        let start = rec.len();
        rec.resize(start + len, 0);
        r.read_exact(&mut rec[start..])?;
        if m & LAST_FRAGMENT != 0 {
            return Ok(Ok(rec));
        }
    }
}

fn read_replies(live: Arc<Live>, stream: TcpStream, stats: Arc<TransportStats>) {
    let mut r = BufReader::with_capacity(256 * 1024, stream);
    let why = loop {
        match read_record(&mut r, MAX_RECORD) {
            Err(e) => break RpcError::Connection(format!("connection lost: {e}")),
            Ok(Err(e)) => {
                stats.bad_records.fetch_add(1, Relaxed);
                break RpcError::Malformed(e);
            }
            Ok(Ok(rec)) => {
                if rec.len() < 4 {
                    stats.bad_records.fetch_add(1, Relaxed);
                    continue;
                }
                let xid = u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]);
                let slot = live.pending.lock().expect("pending lock").remove(&xid);
                match slot {
                    Some(s) => {
                        *s.reply.lock().expect("slot lock") = Some(Ok(rec));
                        s.waiter.unpark();
                    }
                    None => {
                        stats.stray_replies.fetch_add(1, Relaxed);
                    }
                }
            }
        }
    };
    live.kill(&why);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_join_fragments_and_refuse_oversize() {
        let mut s = Vec::new();
        s.extend_from_slice(&3u32.to_be_bytes());
        s.extend_from_slice(b"abc");
        s.extend_from_slice(&(LAST_FRAGMENT | 2).to_be_bytes());
        s.extend_from_slice(b"de");
        let mut r = &s[..];
        assert_eq!(read_record(&mut r, 100).unwrap().unwrap(), b"abcde");
        let mut r = &s[..];
        assert!(read_record(&mut r, 4).unwrap().is_err());
        let mut r = &s[..5];
        assert!(read_record(&mut r, 100).is_err());
    }

    #[test]
    fn reply_headers() {
        let mut v = Vec::new();
        Enc(&mut v).u32(9).u32(1).u32(0).u32(0).u32(0).u32(0).u32(42);
        let r = parse_reply(v).unwrap();
        assert_eq!(r.dec().u32().unwrap(), 42);
        let mut v = Vec::new();
        Enc(&mut v).u32(9).u32(1).u32(1).u32(1).u32(2);
        assert!(matches!(parse_reply(v), Err(RpcError::Rejected(_))));
        let mut v = Vec::new();
        Enc(&mut v).u32(9).u32(0);
        assert!(matches!(parse_reply(v), Err(RpcError::Malformed(_))));
    }
}
