//! ONC-RPC over TCP (RFC 5531) with record marking, pipelined: many calls in
//! flight on one connection, each matched to its reply by XID. No thread of its own
//! reads replies: whoever waits for one does (`RpcClient::poll`, the trial's leading
//! sender; a blocking `call`), taking the connection's receive side, reading every
//! reply that has arrived in one system call, handing each to the thread that waits
//! for it or decoding it in place for an asynchronous call. One thread can so send,
//! receive and complete everything, with no wake-up of another thread per reply.
//! Replies with an XID that nobody waits for (late replies to calls that timed out,
//! garbage) are counted and dropped.

use super::xdr::{Dec, Enc};
use crate::op::Outcome;
use crate::target::idhash::IdHash;
use crate::target::inflight::InflightCap;
use crate::target::readbuf::ReadBuf;
use crate::target::Completion;
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
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

/// Counts an asynchronous call's retransmissions as this thread's, when this thread waited for it.
pub fn add_retransmissions(n: u32) {
    RETRANSMISSIONS.with(|c| c.set(c.get() + n));
}

/// A reply whose header was accepted: the results start at `at`. A blocking call's
/// reply owns its bytes; an asynchronous call's borrows them from the read buffer.
pub struct Reply<B = Vec<u8>> {
    pub buf: B,
    pub at: usize,
}

impl<B: AsRef<[u8]>> Reply<B> {
    pub fn dec(&self) -> Dec<'_> {
        let mut d = Dec::new(self.buf.as_ref());
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
    /// Receive moderation (see `hold_after_read`).
    pub moderation: Moderation,
}

/// How long the reader holds off after a read that found few replies while many calls
/// are in flight, so that its next wake-up collects several (see `hold_after_read`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Moderation {
    Off,
    /// Always this long.
    Fixed(Duration),
    /// A tenth of the reply latency the reader currently observes, at most `ADAPTIVE_HOLD_CAP`.
    Adaptive,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: Duration::from_secs(5),
            retrans: 2,
            uid: 0,
            gid: 0,
            max_outstanding: None,
            connect_timeout: Duration::from_secs(5),
            moderation: Moderation::Adaptive,
        }
    }
}

struct Slot {
    reply: Mutex<Option<Result<Vec<u8>, RpcError>>>,
    waiter: Thread,
    queued_at: Instant,
}

/// What an asynchronous call's completion receives: the reply (header already
/// checked, bytes valid only during the call) and how many times the call was retransmitted.
pub type AnyCallback = Box<dyn for<'a> FnOnce(Result<Reply<&'a [u8]>, RpcError>, u32) + Send>;

/// An asynchronous call's completion.
pub enum Callback {
    /// Any code.
    Boxed(AnyCallback),
    /// A request's completion and the function that makes its outcome of the reply: the
    /// completion is the call's only allocation (boxing it again would be a second per call).
    Outcome(fn(Result<Reply<&[u8]>, RpcError>) -> Outcome, Completion),
}

impl Callback {
    fn run(self, reply: Result<Reply<&[u8]>, RpcError>, retransmitted: u32) {
        match self {
            Callback::Boxed(cb) => cb(reply, retransmitted),
            Callback::Outcome(outcome, done) => done(outcome(reply), retransmitted),
        }
    }
}

/// Records of this capacity or less are kept for the next calls once their reply is in,
/// at most SPARE_RECORDS of them per connection: a call then allocates nothing for its record.
const SPARE_RECORD_BYTES: usize = 1024;
const SPARE_RECORDS: usize = 1024;

struct AsyncCall {
    cb: Callback,
    record: Vec<u8>,
    queued_at: Instant,
    deadline: Instant,
    tries_left: u32,
    retransmitted: u32,
}

enum Waiter {
    Thread(Arc<Slot>),
    Async(AsyncCall),
}

impl Waiter {
    /// Hand the waiter its reply; an asynchronous call's record comes back, for reuse.
    fn finish(self, r: Result<&[u8], RpcError>) -> Option<Vec<u8>> {
        match self {
            Waiter::Thread(s) => {
                *s.reply.lock().expect("slot lock") = Some(r.map(<[u8]>::to_vec));
                s.waiter.unpark();
                None
            }
            Waiter::Async(a) => {
                a.cb.run(r.and_then(parse_reply), a.retransmitted);
                Some(a.record)
            }
        }
    }

    /// When the call was made: the reader's observed latency runs from here.
    fn queued_at(&self) -> Instant {
        match self {
            Waiter::Thread(s) => s.queued_at,
            Waiter::Async(a) => a.queued_at,
        }
    }
}

struct Live {
    writer: Mutex<TcpStream>,
    /// Asynchronous calls waiting for `flush`: many records, one write.
    queued: Mutex<Outbox>,
    pending: Mutex<HashMap<u32, Waiter, IdHash>>,
    /// The receiving side: whoever holds it reads (`RpcClient::poll`).
    rx: Mutex<Rx>,
    /// The socket replies are read from (the writer's clone).
    reader: TcpStream,
    dead: AtomicBool,
    xid: AtomicU32,
    timeout: Duration,
    moderation: Moderation,
}

/// What `flush` sends next, and record buffers to encode calls into.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    spare_records: Vec<Vec<u8>>,
}

/// What a connection's reader keeps between reads.
struct Rx {
    records: Records,
    /// Every whole record of one read, and its waiter: one look-up under the lock for them all.
    batch: Vec<(Range<usize>, Option<Waiter>)>,
    /// The records of the calls this read completed, for the outbox's spares (one lock a read).
    done_records: Vec<Vec<u8>>,
    /// Calls still waiting once the last read's replies were matched.
    in_flight: usize,
    /// The reply latency (call made to reply read), smoothed over reads.
    observed_latency_s: f64,
    last_expire: Instant,
    /// Receive moderation: when the read that found few replies was made, and the time
    /// before which the connection is not read again (see `hold_after_read`).
    hold: Option<(Instant, Instant)>,
}

impl Live {
    fn kill(&self, why: &RpcError) {
        self.dead.store(true, Relaxed);
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(Shutdown::Both);
        }
        let waiters: Vec<Waiter> = self.pending.lock().map(|mut p| p.drain().map(|(_, s)| s).collect()).unwrap_or_default();
        for w in waiters {
            w.finish(Err(why.clone()));
        }
    }

    /// Retransmit or time out the asynchronous calls whose time is up.
    fn expire(&self, now: Instant) {
        let mut expired = Vec::new();
        let mut resend = Vec::new();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            let due: Vec<u32> = pending
                .iter()
                .filter_map(|(x, w)| match w {
                    Waiter::Async(a) if a.deadline <= now => Some(*x),
                    _ => None,
                })
                .collect();
            for xid in due {
                if let Some(Waiter::Async(a)) = pending.get_mut(&xid) {
                    if a.tries_left > 0 {
                        a.tries_left -= 1;
                        a.retransmitted += 1;
                        a.deadline = now + self.timeout;
                        resend.push(a.record.clone());
                        continue;
                    }
                }
                if let Some(w) = pending.remove(&xid) {
                    expired.push(w);
                }
            }
        }
        for rec in resend {
            if let Err(e) = self.writer.lock().expect("writer lock").write_all(&rec) {
                self.kill(&RpcError::Connection(format!("send: {e}")));
                break;
            }
        }
        for w in expired {
            w.finish(Err(RpcError::Timeout));
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
    /// Reads of replies, the holds after them, and the time held (see `hold_after_read`).
    pub reads: AtomicU64,
    pub holds: AtomicU64,
    pub held_ns: AtomicU64,
    pub longest_hold_ns: AtomicU64,
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
    inflight: InflightCap,
    pub stats: Arc<TransportStats>,
    xid_seed: u32,
    /// Threads that found a connection's receive side taken and wait for it to be free.
    want_read: Mutex<Vec<Thread>>,
    want_read_count: AtomicUsize,
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
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(1) ^ std::process::id().rotate_left(16);
        RpcClient {
            addr,
            prog,
            vers,
            auth: auth_sys(opts.uid, opts.gid),
            conns: (0..conns.max(1)).map(|_| Conn { live: Mutex::new((None, None)) }).collect(),
            next: AtomicUsize::new(0),
            inflight: InflightCap::new(opts.max_outstanding),
            opts,
            stats: Arc::new(TransportStats::default()),
            xid_seed: seed,
            want_read: Mutex::new(Vec::new()),
            want_read_count: AtomicUsize::new(0),
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
        let stream =
            TcpStream::connect_timeout(&self.addr, self.opts.connect_timeout).map_err(|e| RpcError::Connection(format!("connect to {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone().map_err(|e| RpcError::Connection(e.to_string()))?;
        let live = Arc::new(Live {
            writer: Mutex::new(stream),
            queued: Mutex::new(Outbox { bytes: Vec::with_capacity(64 * 1024), spare_records: Vec::new() }),
            pending: Mutex::new(HashMap::default()),
            rx: Mutex::new(Rx {
                records: Records::new(MAX_RECORD),
                batch: Vec::new(),
                done_records: Vec::new(),
                in_flight: 0,
                observed_latency_s: 0.0,
                last_expire: Instant::now(),
                hold: None,
            }),
            reader,
            dead: AtomicBool::new(false),
            xid: AtomicU32::new(self.xid_seed.wrapping_add((index as u32) << 24)),
            timeout: self.opts.timeout,
            moderation: self.opts.moderation,
        });
        g.0 = Some(live.clone());
        Ok(live)
    }

    /// Read and hand out the replies that have arrived on every connection, waiting up to
    /// `timeout` for the first. What one connection's receive moderation holds back is not
    /// read before its hold ends. Completions run on the calling thread.
    pub fn poll(&self, timeout: Duration) {
        // A dead connection has nothing more to say (its calls have failed): waiting on it would spin.
        let alive = |c: &Conn| c.live.lock().expect("conn lock").0.clone().filter(|l| !l.dead.load(Relaxed));
        if let [only] = &self.conns[..] {
            return self.receive(alive(only).as_slice(), timeout);
        }
        let lives: Vec<Arc<Live>> = self.conns.iter().filter_map(alive).collect();
        self.receive(&lives, timeout);
    }

    /// `poll` on some connections. Where another thread is reading, wait (up to `timeout`) for
    /// it to finish a read instead: it hands out this thread's replies too.
    fn receive(&self, lives: &[Arc<Live>], timeout: Duration) {
        let mut held: Vec<(&Live, MutexGuard<Rx>)> = lives.iter().filter_map(|l| l.rx.try_lock().ok().map(|rx| (&**l, rx))).collect();
        if held.is_empty() {
            if !lives.is_empty() {
                self.wait_to_read(timeout);
            } else {
                std::thread::sleep(timeout); // nothing connected: nothing can complete meanwhile
            }
            return;
        }
        let deadline = Instant::now() + timeout;
        let mut fds = Vec::with_capacity(held.len());
        loop {
            let now = Instant::now();
            let (mut got, mut hold_ends) = (false, deadline);
            fds.clear();
            for (live, rx) in held.iter_mut() {
                if let Some((_, until)) = rx.hold {
                    if until > now {
                        hold_ends = hold_ends.min(until);
                        continue;
                    }
                }
                match live.read_now(rx, &self.stats, now) {
                    Read::Some | Read::Dead => got = true,
                    Read::Nothing => fds.push(libc::pollfd { fd: live.reader.as_raw_fd(), events: libc::POLLIN, revents: 0 }),
                }
            }
            if got || now >= deadline {
                break;
            }
            if fds.is_empty() {
                std::thread::sleep(hold_ends - now); // every connection is on hold
            } else if !wait_readable(&mut fds, hold_ends - now) && hold_ends == deadline {
                break; // timed out with nothing to read: no read to find that out again
            }
        }
        drop(held);
        if self.want_read_count.load(SeqCst) > 0 {
            for t in self.want_read.lock().expect("want-read lock").drain(..) {
                t.unpark();
            }
        }
    }

    /// Another thread is reading: park until it has finished a read (or `timeout`).
    fn wait_to_read(&self, timeout: Duration) {
        self.want_read.lock().expect("want-read lock").push(std::thread::current());
        self.want_read_count.fetch_add(1, SeqCst);
        // A reader that finished between the failed try and the registration woke nobody: the
        // short bound covers that race.
        std::thread::park_timeout(timeout.min(RECHECK_READER));
        self.want_read_count.fetch_sub(1, SeqCst);
    }

    /// One call: `args` appends the procedure's arguments. Blocks until the reply,
    /// retransmitting (same XID) after each timeout.
    fn pick(&self) -> Result<Arc<Live>, RpcError> {
        let index = if self.conns.len() == 1 { 0 } else { self.next.fetch_add(1, Relaxed) % self.conns.len() };
        self.live(&self.conns[index], index, false)
    }

    fn record(&self, xid: u32, proc_: u32, args: impl FnOnce(&mut Enc)) -> Vec<u8> {
        let mut rec = Vec::with_capacity(256);
        self.encode(&mut rec, xid, proc_, args);
        rec
    }

    /// Encode a call into `rec` (emptied first).
    fn encode(&self, rec: &mut Vec<u8>, xid: u32, proc_: u32, args: impl FnOnce(&mut Enc)) {
        rec.clear();
        {
            let mut e = Enc(rec);
            e.u32(0).u32(xid).u32(0).u32(2).u32(self.prog).u32(self.vers).u32(proc_);
            e.0.extend_from_slice(&self.auth);
            args(&mut e);
        }
        let len = (rec.len() - 4) as u32;
        rec[..4].copy_from_slice(&(LAST_FRAGMENT | len).to_be_bytes());
    }

    /// Queue a call and return at once; `flush` sends what was queued. `cb` runs with
    /// the reply (on the connection's reader thread), the timeout, or a connection error.
    pub fn call_async(&self, proc_: u32, args: impl FnOnce(&mut Enc), cb: Callback) {
        let live = match self.pick() {
            Ok(l) => l,
            Err(e) => return cb.run(Err(e), 0),
        };
        let xid = live.xid.fetch_add(1, Relaxed);
        // Queued and pending under the queue's lock: no flush sends it before its reply is awaited.
        let mut queued = live.queued.lock().expect("queue lock");
        let mut rec = queued.spare_records.pop().unwrap_or_else(|| Vec::with_capacity(256));
        self.encode(&mut rec, xid, proc_, args);
        queued.bytes.extend_from_slice(&rec);
        if self.opts.retrans == 0 {
            queued.spare_records.push(std::mem::take(&mut rec)); // never sent again: no copy to keep
        }
        let now = Instant::now();
        let call = AsyncCall { cb, record: rec, queued_at: now, deadline: now + self.opts.timeout, tries_left: self.opts.retrans, retransmitted: 0 };
        live.pending.lock().expect("pending lock").insert(xid, Waiter::Async(call));
    }

    /// Send every queued asynchronous call: one write per connection.
    pub fn flush(&self) {
        for c in &self.conns {
            let live = c.live.lock().expect("conn lock").0.clone();
            let Some(live) = live else { continue };
            let mut w = live.writer.lock().expect("writer lock");
            let out = std::mem::take(&mut live.queued.lock().expect("queue lock").bytes);
            if out.is_empty() {
                continue;
            }
            let sent = w.write_all(&out);
            drop(w);
            let mut q = live.queued.lock().expect("queue lock");
            if q.bytes.is_empty() {
                // Keep the allocation for the next batch.
                let mut out = out;
                out.clear();
                q.bytes = out;
            }
            drop(q);
            if let Err(e) = sent {
                live.kill(&RpcError::Connection(format!("send to {}: {e}", self.addr)));
            }
        }
    }

    /// How long a call may take before it times out, retransmissions included.
    pub fn give_up_after(&self) -> Duration {
        self.opts.timeout * (self.opts.retrans + 1)
    }

    /// Whether `call_async` may be used: a cap on calls in flight needs blocking callers.
    pub fn pipelines(&self) -> bool {
        self.opts.max_outstanding.is_none()
    }

    pub fn call(&self, proc_: u32, args: impl FnOnce(&mut Enc)) -> Result<Reply, RpcError> {
        let live = self.pick()?;
        let xid = live.xid.fetch_add(1, Relaxed);
        let rec = self.record(xid, proc_, args);

        let _permit = self.inflight.acquire();
        let slot = Arc::new(Slot { reply: Mutex::new(None), waiter: std::thread::current(), queued_at: Instant::now() });
        live.pending.lock().expect("pending lock").insert(xid, Waiter::Thread(slot.clone()));
        let mut tries_left = self.opts.retrans;
        let result = loop {
            if let Err(e) = live.writer.lock().expect("writer lock").write_all(&rec) {
                let err = RpcError::Connection(format!("send to {}: {e}", self.addr));
                live.kill(&err);
                break Err(err);
            }
            let deadline = Instant::now() + self.opts.timeout;
            let lives = [live.clone()];
            let got = loop {
                if let Some(r) = slot.reply.lock().expect("slot lock").take() {
                    break Some(r);
                }
                let now = Instant::now();
                if now >= deadline || live.dead.load(Relaxed) {
                    break slot.reply.lock().expect("slot lock").take();
                }
                self.receive(&lives, deadline - now);
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

    /// How the readers held off between reads (`hold_after_read`): the policy, its bound on
    /// the latency a hold adds, and what was actually held, since measured latencies include it.
    pub fn moderation_report(&self) -> serde_json::Value {
        let s = &self.stats;
        let holds = s.holds.load(Relaxed);
        let held_us = s.held_ns.load(Relaxed) as f64 / 1e3;
        let mut report = serde_json::json!({
            "mode": match self.opts.moderation {
                Moderation::Off => "off",
                Moderation::Fixed(_) => "fixed",
                Moderation::Adaptive => "adaptive",
            },
            "reads": s.reads.load(Relaxed),
            "holds": holds,
            "mean_hold_us": if holds > 0 { held_us / holds as f64 } else { 0.0 },
            "max_hold_us": s.longest_hold_ns.load(Relaxed) as f64 / 1e3,
        });
        match self.opts.moderation {
            Moderation::Off => {}
            Moderation::Fixed(wait) => report["hold_us"] = serde_json::json!(wait.as_secs_f64() * 1e6),
            Moderation::Adaptive => {
                report["hold_fraction_of_latency"] = serde_json::json!(ADAPTIVE_HOLD_FRACTION);
                report["hold_cap_us"] = serde_json::json!(ADAPTIVE_HOLD_CAP.as_secs_f64() * 1e6);
            }
        }
        report
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

/// Check a reply's header; the results follow it.
pub fn parse_reply<B: AsRef<[u8]>>(buf: B) -> Result<Reply<B>, RpcError> {
    let bad = |e: super::xdr::XdrError| RpcError::Malformed(e.to_string());
    let mut d = Dec::new(buf.as_ref());
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

/// Records assembled from a byte stream that arrives in arbitrary pieces.
pub struct Records {
    b: ReadBuf,
    max: usize,
}

pub enum Next {
    /// Where the next whole record lies in `Records::get` (fragments already joined).
    Record(Range<usize>),
    /// More bytes are needed.
    Incomplete,
    /// The stream is broken (an oversized record): nothing after it can be trusted.
    Broken(String),
}

impl Records {
    pub fn new(max: usize) -> Records {
        Records { b: ReadBuf::new(max), max }
    }

    /// Space to read into (compacting and growing as needed).
    pub fn space(&mut self) -> &mut [u8] {
        self.b.space()
    }

    pub fn filled(&mut self, n: usize) {
        self.b.filled(n)
    }

    /// A record's bytes, valid until the next `space`.
    pub fn get(&self, record: Range<usize>) -> &[u8] {
        self.b.get(record)
    }

    pub fn next(&mut self) -> Next {
        let mut at = self.b.start;
        let mut total = 0usize;
        let mut fragments = 0;
        loop {
            if self.b.end - at < 4 {
                return Next::Incomplete;
            }
            let m = u32::from_be_bytes([self.b.buf[at], self.b.buf[at + 1], self.b.buf[at + 2], self.b.buf[at + 3]]);
            let len = (m & !LAST_FRAGMENT) as usize;
            total += len;
            fragments += 1;
            if total > self.max {
                return Next::Broken(format!("record of more than {} bytes", self.max));
            }
            if self.b.end - at - 4 < len {
                return Next::Incomplete;
            }
            at += 4 + len;
            if m & LAST_FRAGMENT != 0 {
                break;
            }
        }
        let first = self.b.start + 4;
        if fragments > 1 {
            // Join the fragments in place: each one moves down over the marks before it.
            let (mut joined, mut p) = (first, self.b.start);
            while p < at {
                let len = (u32::from_be_bytes([self.b.buf[p], self.b.buf[p + 1], self.b.buf[p + 2], self.b.buf[p + 3]]) & !LAST_FRAGMENT) as usize;
                self.b.buf.copy_within(p + 4..p + 4 + len, joined);
                joined += len;
                p += 4 + len;
            }
        }
        self.b.start = at;
        Next::Record(first..first + total)
    }
}

/// Longest wait of a thread that found another reading before it looks again itself.
const RECHECK_READER: Duration = Duration::from_millis(1);
/// How often the reader looks for asynchronous calls whose time is up.
const EXPIRE_EVERY: Duration = Duration::from_millis(50);
/// Receive moderation holds only after a read found fewer replies than this while at
/// least this many calls were still in flight: a light load's replies are never held.
const FEW_REPLIES: usize = 8;
/// The adaptive hold is this fraction of the observed reply latency...
pub const ADAPTIVE_HOLD_FRACTION: f64 = 0.1;
/// ...and never longer than this.
pub const ADAPTIVE_HOLD_CAP: Duration = Duration::from_micros(200);
/// The observed latency is an exponentially weighted mean over about this many reads.
const LATENCY_EWMA_READS: f64 = 16.0;

/// How long the reader holds off before its next read. A server that answers one call
/// at a time (ganesha: every ~30 µs) would otherwise wake the reader for every reply,
/// and each wake-up costs the client several µs of kernel time. A hold delays a reply
/// by at most its length; the adaptive one is a tenth of the latency the reader
/// observes (which already includes any hold), so it inflates latency by at most ~11%.
pub fn hold_after_read(moderation: Moderation, in_flight: usize, found: usize, observed_latency: Duration) -> Duration {
    if found >= FEW_REPLIES || in_flight < FEW_REPLIES {
        return Duration::ZERO;
    }
    match moderation {
        Moderation::Off => Duration::ZERO,
        Moderation::Fixed(wait) => wait,
        Moderation::Adaptive => observed_latency.mul_f64(ADAPTIVE_HOLD_FRACTION).min(ADAPTIVE_HOLD_CAP),
    }
}

/// What one read on a connection did.
enum Read {
    /// Bytes arrived (and were handed to their waiters).
    Some,
    /// Nothing has arrived yet.
    Nothing,
    /// The connection is gone (its waiters were told).
    Dead,
}

impl Live {
    /// Read whatever has arrived without waiting, hand every whole reply to its waiter and
    /// look after the calls whose time is up. `now` is the time of the read.
    fn read_now(&self, rx: &mut Rx, stats: &TransportStats, now: Instant) -> Read {
        if let Some((read_at, _)) = rx.hold.take() {
            // The replies that arrived meanwhile were held back this long at most.
            let held = now.saturating_duration_since(read_at).as_nanos() as u64;
            stats.held_ns.fetch_add(held, Relaxed);
            stats.longest_hold_ns.fetch_max(held, Relaxed);
        }
        let read = {
            let space = rx.records.space();
            // SAFETY: the buffer is valid for its length; the descriptor is this connection's socket.
            unsafe { libc::recv(self.reader.as_raw_fd(), space.as_mut_ptr().cast(), space.len(), libc::MSG_DONTWAIT) }
        };
        let outcome = match read {
            0 => Err(RpcError::Connection("connection closed by the server".into())),
            n if n > 0 => {
                rx.records.filled(n as usize);
                stats.reads.fetch_add(1, Relaxed);
                self.hand_out(rx, stats, now)
            }
            _ => match std::io::Error::last_os_error() {
                e if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => Ok(Read::Nothing),
                e => Err(RpcError::Connection(format!("connection lost: {e}"))),
            },
        };
        let outcome = outcome.and_then(|r| if self.dead.load(Relaxed) { Err(RpcError::Connection("connection closed".into())) } else { Ok(r) });
        if now.duration_since(rx.last_expire) >= EXPIRE_EVERY {
            rx.last_expire = now;
            self.expire(now);
        }
        match outcome {
            Ok(r) => r,
            Err(why) => {
                self.kill(&why);
                Read::Dead
            }
        }
    }

    /// Hand every whole record read so far to its waiter; decide the hold before the next read.
    fn hand_out(&self, rx: &mut Rx, stats: &TransportStats, now: Instant) -> Result<Read, RpcError> {
        let broken = loop {
            match rx.records.next() {
                Next::Incomplete => break None,
                Next::Broken(e) => break Some(e),
                Next::Record(r) if r.len() < 4 => {
                    stats.bad_records.fetch_add(1, Relaxed);
                }
                Next::Record(r) => rx.batch.push((r, None)),
            }
        };
        if !rx.batch.is_empty() {
            let mut pending = self.pending.lock().expect("pending lock");
            for (r, waiter) in rx.batch.iter_mut() {
                let rec = rx.records.get(r.clone());
                *waiter = pending.remove(&u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]));
            }
            rx.in_flight = pending.len();
        }
        // The first reply of the read stands for it: one sample a read.
        if let Some(w) = rx.batch.iter().find_map(|(_, w)| w.as_ref()) {
            let latency = now.saturating_duration_since(w.queued_at()).as_secs_f64();
            rx.observed_latency_s += (latency - rx.observed_latency_s) / LATENCY_EWMA_READS;
        }
        let found = rx.batch.len();
        for (r, waiter) in rx.batch.drain(..) {
            match waiter {
                Some(w) => {
                    if let Some(record) = w.finish(Ok(rx.records.get(r))).filter(|rec| (1..=SPARE_RECORD_BYTES).contains(&rec.capacity())) {
                        rx.done_records.push(record);
                    }
                }
                None => {
                    stats.stray_replies.fetch_add(1, Relaxed);
                }
            }
        }
        if !rx.done_records.is_empty() {
            let mut queued = self.queued.lock().expect("queue lock");
            let room = SPARE_RECORDS.saturating_sub(queued.spare_records.len());
            let keep = rx.done_records.len().min(room);
            queued.spare_records.extend(rx.done_records.drain(..keep));
            rx.done_records.clear();
        }
        if let Some(e) = broken {
            stats.bad_records.fetch_add(1, Relaxed);
            return Err(RpcError::Malformed(e));
        }
        let hold = hold_after_read(self.moderation, rx.in_flight, found, Duration::from_secs_f64(rx.observed_latency_s));
        if !hold.is_zero() {
            stats.holds.fetch_add(1, Relaxed);
            rx.hold = Some((now, now + hold));
        }
        Ok(Read::Some)
    }
}

/// Wait until one of `fds` is readable or `timeout` has passed (ns resolution, unlike poll);
/// false when it timed out.
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: Duration) -> bool {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: `fds` is a valid array of its length; EINTR and errors make the caller look again.
    unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) != 0 }
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
        // Two records, byte by byte, then all at once.
        let mut recs = Records::new(100);
        let mut got = Vec::new();
        for b in s.iter().chain(s.iter()) {
            recs.space()[0] = *b;
            recs.filled(1);
            while let Next::Record(r) = recs.next() {
                got.push(recs.get(r).to_vec());
            }
        }
        let n = s.len();
        recs.space()[..2 * n].copy_from_slice(&[&s[..], &s[..]].concat());
        recs.filled(2 * n);
        while let Next::Record(r) = recs.next() {
            got.push(recs.get(r).to_vec());
        }
        assert_eq!(got, vec![b"abcde".to_vec(); 4]);
        // A truncated record waits for more; an oversized one breaks the stream.
        let mut recs = Records::new(100);
        recs.space()[..n - 1].copy_from_slice(&s[..n - 1]);
        recs.filled(n - 1);
        assert!(matches!(recs.next(), Next::Incomplete));
        let mut recs = Records::new(4);
        recs.space()[..n].copy_from_slice(&s);
        recs.filled(n);
        assert!(matches!(recs.next(), Next::Broken(_)));
    }

    #[test]
    fn holds_only_with_many_in_flight_and_few_found_and_adaptively_a_tenth_of_latency() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        // A light load (few in flight) or a read that already found many: never held.
        for m in [Moderation::Off, Moderation::Fixed(us(200)), Moderation::Adaptive] {
            assert_eq!(hold_after_read(m, 7, 1, ms(2)), Duration::ZERO);
            assert_eq!(hold_after_read(m, 64, 8, ms(2)), Duration::ZERO);
        }
        assert_eq!(hold_after_read(Moderation::Off, 64, 1, ms(2)), Duration::ZERO);
        assert_eq!(hold_after_read(Moderation::Fixed(us(200)), 64, 1, us(50)), us(200));
        // Adaptive: a tenth of what the reader observes, capped.
        assert_eq!(hold_after_read(Moderation::Adaptive, 16, 1, us(400)), us(40));
        assert_eq!(hold_after_read(Moderation::Adaptive, 64, 1, ms(2)), ADAPTIVE_HOLD_CAP);
        assert_eq!(hold_after_read(Moderation::Adaptive, 64, 1, Duration::ZERO), Duration::ZERO);
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

    /// Every NFSv3 reply decoder on the results after a reply header.
    fn decode_all(results: &[u8]) {
        for decode in super::super::proto::DECODERS {
            decode(&mut Dec::new(results));
        }
    }

    #[test]
    #[ignore = "a fuzz target: scripts/fuzz.sh runs it"]
    fn fuzz_nfs_reply() {
        // Record-marked replies: an accepted header, then results (a post_op_attr, a READ, a READDIR page).
        let mut header = Vec::new();
        Enc(&mut header).u32(7).u32(1).u32(0).u32(0).u32(0).u32(0);
        let mut attr = Vec::new();
        Enc(&mut attr).u32(0).bool(true).u32(1).u32(0o644).u32(1).u32(0).u32(0).u64(4096).u64(4096).u64(0).u64(1).u64(2);
        Enc(&mut attr).u32(0).u32(0).u32(0).u32(0).u32(0).u32(0);
        let mut read = attr.clone();
        Enc(&mut read).u32(5).bool(true).opaque(b"hello");
        let mut page = attr.clone();
        Enc(&mut page).fixed(&[0; 8]).bool(true).u64(9).str("f0").u64(1).bool(false).bool(false).bool(true);
        let seeds: Vec<Vec<u8>> = [attr, read, page]
            .iter()
            .map(|results| {
                let record = [&header[..], results].concat();
                [&(LAST_FRAGMENT | record.len() as u32).to_be_bytes()[..], &record].concat()
            })
            .collect();
        let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
        crate::fuzz::fuzz("nfs reply", &seeds, |input| {
            let step = 1 + input.last().copied().unwrap_or(0) as usize * 97;
            let (mut records, mut rest) = (Records::new(64 * 1024), input);
            'stream: while !rest.is_empty() {
                let space = records.space();
                let n = space.len().min(step).min(rest.len());
                space[..n].copy_from_slice(&rest[..n]);
                records.filled(n);
                rest = &rest[n..];
                loop {
                    match records.next() {
                        Next::Record(r) => {
                            if let Ok(reply) = parse_reply(records.get(r)) {
                                decode_all(&reply.buf[reply.at..]);
                            }
                        }
                        Next::Incomplete => break,
                        Next::Broken(_) => break 'stream, // the reader gives up on the connection
                    }
                }
            }
            // The same bytes as results without a header, so the decoders meet every mutation.
            decode_all(input.get(4..).unwrap_or(&[]));
        });
    }
}
