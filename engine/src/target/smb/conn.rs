//! SMB2 connections, pipelined: each connection negotiates, authenticates (NTLMv2) and
//! connects to the share once, then carries many requests in flight, each matched to
//! its response by message ID. A request is one message or a related compound (a CREATE,
//! QUERY_INFO and CLOSE go out as one), sent under the credits the server has granted.
//! Requests queued meanwhile go out in one write (`flush`). No thread of its own reads
//! responses: whoever waits for one does (`Client::poll`, the trial's leading sender; a
//! blocking `call`), as the NFS client does (nfs/rpc.rs): one system call reads every
//! response that has arrived, and completes each request whose every part has come, on
//! the reading thread, with no wake-up of another thread per response. With many requests
//! in flight, a wait (the sender's, until its next request is due) no longer than NFS's
//! adaptive hold (`hold_after_read`: a tenth of the observed latency, at most 200 µs) does
//! not watch the connection: what arrives meanwhile is read at its end, in one read, with no
//! wake-up per response. (Without the cap, holds feed the latency they are a tenth of: reads
//! behind a blocking open went from 3,000 to 1,200 ops/s on the test machine.)

use super::ntlm;
use super::seal::{self, Sealer};
use super::sign::{self, Preauth, Signer};
use super::wire::{self, Header, Negotiated, Req};
use crate::spec::{Encrypt, Signing};
use crate::target::idhash::IdHash;
use crate::target::inflight::InflightCap;
use crate::target::nfs::rpc::{hold_after_read, wait_readable, Moderation, ADAPTIVE_HOLD_CAP, ADAPTIVE_HOLD_FRACTION};
use crate::target::readbuf::ReadBuf;
use rand::Rng;
use std::collections::HashMap;
use std::io::{Read as _, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A dead connection is re-dialled at most this often, so a dead server costs little.
const REDIAL_EVERY: Duration = Duration::from_millis(500);
/// How often the reader looks for requests whose time is up; no wait for a response is longer.
/// The leading sender's send slack is the receive-moderation bound divided by this.
const SEND_SLACK_OF_HOLD: u64 = 2;
const EXPIRE_EVERY: Duration = Duration::from_millis(50);
/// The observed latency is an exponentially weighted mean over about this many reads.
const LATENCY_EWMA_READS: f64 = 16.0;
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
/// What an asynchronous request's completion receives (on the thread that read its responses).
pub type Callback = Box<dyn FnOnce(Res<Replies>) + Send>;

/// Who or what to connect as.
#[derive(Clone, Debug)]
pub struct Login {
    pub share: String,
    pub user: String,
    pub password: String,
    pub domain: String,
    pub dialects: Vec<u16>,
    pub signing: Signing,
    pub encrypt: Encrypt,
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
    queued_at: Instant,
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

/// What a connection's reader keeps between reads.
struct Rx {
    frames: Frames,
    /// A decrypted frame (encrypted sessions).
    plain: Vec<u8>,
    /// The calls a read completes, in a list kept from read to read (no allocation per read).
    done: Vec<Call>,
    last_expire: Instant,
    /// The response latency (request queued to response read), smoothed over reads.
    observed_latency_s: f64,
    /// Receive moderation: when a wait that does not watch the connection began, and when
    /// it ends (see `Client::receive`).
    hold: Option<(Instant, Instant)>,
}

/// What one read on a connection did.
enum Read {
    /// Bytes arrived (and completed what they answered).
    Some,
    /// Nothing has arrived yet.
    Nothing,
    /// The connection is gone (its calls were told).
    Dead,
}

pub struct Live {
    writer: Mutex<TcpStream>,
    /// The socket responses are read from (the writer's clone).
    reader: TcpStream,
    /// The receiving side: whoever holds it reads (`Client::poll`, a blocking `call`).
    rx: Mutex<Rx>,
    send: Mutex<Outbox>,
    pending: Mutex<HashMap<u64, Entry, IdHash>>,
    /// Calls in `pending` (not their later parts): what receive moderation weighs.
    calls: AtomicUsize,
    dead: AtomicBool,
    /// The server said the session expired: new requests go to a fresh connection (and
    /// session); this one finishes what it has in flight, then closes.
    expired: AtomicBool,
    session: u64,
    tree: u32,
    /// Signs every request and checks every signed response, when signing is on.
    signer: Option<Signer>,
    /// Encrypts every request and decrypts every response, when the session is encrypted.
    sealer: Option<Sealer>,
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
                self.calls.store(0, Relaxed);
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
                        self.calls.fetch_sub(1, Relaxed);
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
        // The frame's length, then room for the transform header of an encrypted session.
        let msgs_at = start + 4 + if self.sealer.is_some() { seal::TRANSFORM } else { 0 };
        send.queued.resize(msgs_at, 0);
        let mut last_at = 0;
        let mut starts = Vec::new(); // where each message begins, for signing (no allocation unsigned)
        for (i, r) in reqs.iter().enumerate() {
            if i > 0 {
                // Each message of a compound starts 8-byte aligned; the one before points at it.
                while !(send.queued.len() - msgs_at).is_multiple_of(8) {
                    send.queued.push(0);
                }
                let next = (send.queued.len() - last_at) as u32;
                send.queued[last_at + 20..last_at + 24].copy_from_slice(&next.to_le_bytes());
            }
            last_at = send.queued.len();
            if self.signer.is_some() {
                starts.push(last_at);
            }
            let mid = send.next_mid;
            send.next_mid += r.charge.max(1) as u64;
            mids.push(mid);
            let flags = if i > 0 { wire::FLAG_RELATED } else { 0 };
            wire::put_header(&mut send.queued, r.command, r.charge, r.charge + ask, flags, mid, self.tree, self.session);
            send.queued.extend_from_slice(&r.body);
        }
        let len = (send.queued.len() - start - 4) as u32;
        send.queued[start..start + 4].copy_from_slice(&len.to_be_bytes());
        if let Some(k) = &self.sealer {
            k.seal(&mut send.queued[start + 4..]);
        } else if let Some(k) = &self.signer {
            // Each message is signed with the padding that follows it, once the next points past it.
            for (i, at) in starts.iter().enumerate() {
                let end = starts.get(i + 1).copied().unwrap_or(send.queued.len());
                k.sign(&mut send.queued[*at..end]);
            }
        }
        let first = mids[0];
        let now = Instant::now();
        let call = Call { parts: vec![None; reqs.len()], mids, queued_at: now, deadline: now + timeout, waiter };
        let mut pending = self.pending.lock().expect("pending lock");
        // `kill` marks the connection dead before it empties `pending`: a call added after
        // that would wait for a reader that has gone.
        if self.dead.load(Relaxed) {
            return Err((SmbError::Connection("connection closed".into()), call.waiter));
        }
        for m in &call.mids[1..] {
            pending.insert(*m, Entry::Part(first));
        }
        pending.insert(first, Entry::Call(call));
        self.calls.fetch_add(1, Relaxed);
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
            let mut send = self.send.lock().expect("send lock");
            send.credits = send.credits.saturating_add(h.credits as u32);
        }
        if h.status == wire::STATUS_NETWORK_SESSION_EXPIRED {
            self.expired.store(true, Relaxed);
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
        self.calls.fetch_sub(1, Relaxed);
        Some(call)
    }

    /// Read whatever has arrived without waiting, complete every request it answers and
    /// look after the requests whose time is up. `now` is the time of the read.
    fn read_now(&self, rx: &mut Rx, stats: &ReceiveStats, now: Instant) -> Read {
        if let Some((read_at, _)) = rx.hold.take() {
            // The responses that arrived meanwhile were held back this long at most.
            let held = now.saturating_duration_since(read_at).as_nanos() as u64;
            stats.held_ns.fetch_add(held, Relaxed);
            stats.longest_hold_ns.fetch_max(held, Relaxed);
        }
        let read = {
            let space = rx.frames.space();
            // SAFETY: the buffer is valid for its length; the descriptor is this connection's socket.
            unsafe { libc::recv(self.reader.as_raw_fd(), space.as_mut_ptr().cast(), space.len(), libc::MSG_DONTWAIT) }
        };
        let outcome = match read {
            0 => Err(SmbError::Connection("connection closed by the server".into())),
            n if n > 0 => {
                rx.frames.filled(n as usize);
                stats.reads.fetch_add(1, Relaxed);
                self.hand_out(rx, stats, now)
            }
            _ => match std::io::Error::last_os_error() {
                e if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => Ok(Read::Nothing),
                e => Err(SmbError::Connection(format!("connection lost: {e}"))),
            },
        };
        let outcome = outcome.and_then(|r| {
            if self.dead.load(Relaxed) {
                Err(SmbError::Connection("connection closed".into()))
            } else if self.expired.load(Relaxed) && self.calls.load(Relaxed) == 0 {
                Err(SmbError::Status(wire::STATUS_NETWORK_SESSION_EXPIRED))
            } else {
                Ok(r)
            }
        });
        self.expire_due(rx, now);
        match outcome {
            Ok(r) => r,
            Err(why) => {
                self.kill(&why);
                Read::Dead
            }
        }
    }

    /// Fail the requests whose time is up, every EXPIRE_EVERY.
    fn expire_due(&self, rx: &mut Rx, now: Instant) {
        if now.duration_since(rx.last_expire) >= EXPIRE_EVERY {
            rx.last_expire = now;
            self.expire(now);
        }
    }

    /// Complete every request whose responses the frames read so far hold. A broken stream
    /// still completes what the frames before the break answered.
    fn hand_out(&self, rx: &mut Rx, stats: &ReceiveStats, now: Instant) -> Result<Read, SmbError> {
        let broken = 'frames: loop {
            match rx.frames.next() {
                Frame::Incomplete => break None,
                Frame::Broken(e) => break Some(e),
                Frame::Whole(r) => match frame_messages(rx.frames.get(r), self.sealer.as_ref(), &mut rx.plain) {
                    Ok(msgs) => {
                        for (h, m) in msgs {
                            if let Some(k) = &self.signer {
                                if h.flags & sign::FLAG_SIGNED != 0 && !k.verify(m) {
                                    break 'frames Some(SmbError::Malformed(format!("message {} has a wrong signature", h.mid)));
                                }
                            }
                            if let Some(c) = self.take(m, &h, &stats.stray) {
                                rx.done.push(c);
                            }
                        }
                    }
                    Err(e) => break Some(SmbError::Malformed(e)),
                },
            }
        };
        // The first request a read completes stands for it: one latency sample a read.
        if let Some(c) = rx.done.first() {
            let latency = now.saturating_duration_since(c.queued_at).as_secs_f64();
            rx.observed_latency_s += (latency - rx.observed_latency_s) / LATENCY_EWMA_READS;
        }
        for mut c in rx.done.drain(..) {
            let parts = std::mem::take(&mut c.parts).into_iter().map(Option::unwrap_or_default).collect();
            c.finish(Ok(parts));
        }
        match broken {
            Some(e) => Err(e),
            None => Ok(Read::Some),
        }
    }
}

struct Conn {
    live: Mutex<(Option<Arc<Live>>, Option<Instant>)>,
}

/// Counters of the receiving side.
pub struct ReceiveStats {
    stray: Arc<AtomicU64>,
    /// Reads of responses, the waits that did not watch for them, and the time those held them back.
    reads: AtomicU64,
    holds: AtomicU64,
    held_ns: AtomicU64,
    longest_hold_ns: AtomicU64,
}

pub struct Client {
    pub addr: SocketAddr,
    login: Login,
    conns: Vec<Conn>,
    /// Connections whose session expired, replaced by new ones: read until what they have in flight is answered.
    retiring: Mutex<Vec<Arc<Live>>>,
    next: AtomicUsize,
    generations: AtomicU64,
    max_outstanding: Option<usize>,
    inflight: InflightCap,
    pub stray_replies: Arc<AtomicU64>,
    pub reconnects: AtomicU64,
    /// New sessions set up because the server expired one.
    pub reauthentications: AtomicU64,
    stats: ReceiveStats,
    /// Threads that found a connection's receive side taken and wait for it to be free (one is woken per release).
    want_read: Mutex<Vec<Thread>>,
    want_read_count: AtomicUsize,
    /// Half the last receive-moderation bound (ns): how late the leading sender may send (`send_slack`).
    send_slack_ns: AtomicU64,
}

fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = (msg.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

/// Fill `buf` by `deadline`: a server that trickles bytes cannot stretch the wait.
fn read_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Res<()> {
    let mut at = 0;
    while at < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SmbError::Timeout);
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(SmbError::Connection("connection closed by the server".into())),
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return Err(SmbError::Timeout),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SmbError::Connection(format!("read: {e}"))),
        }
    }
    Ok(())
}

fn read_frame(s: &mut TcpStream, deadline: Instant) -> Res<Vec<u8>> {
    let mut len = [0u8; 4];
    read_by(s, &mut len, deadline)?;
    let n = frame_len(len)?;
    let mut msg = vec![0; n];
    read_by(s, &mut msg, deadline)?;
    Ok(msg)
}

/// The length a Direct TCP frame header announces: a zero byte, then 24 bits, at least
/// an SMB2 header and at most `MAX_FRAME`.
fn frame_len(b: [u8; 4]) -> Res<usize> {
    let n = u32::from_be_bytes(b) as usize;
    if b[0] != 0 || !(wire::HEADER..=wire::MAX_FRAME).contains(&n) {
        return Err(SmbError::Malformed(format!("frame of {n} bytes")));
    }
    Ok(n)
}

/// How a handshake request is protected: signed, encrypted (and its reply decrypted), or neither.
#[derive(Clone, Copy)]
enum Guard<'a> {
    None,
    Sign(&'a Signer),
    Seal(&'a Sealer),
}

/// One request and its response on a connection nobody else uses yet (the handshake):
/// (response header, response, the message sent).
fn exchange(s: &mut TcpStream, req: &Req, mid: u64, session: u64, guard: Guard, timeout: Duration) -> Res<(Header, Vec<u8>, Vec<u8>)> {
    let mut msg = Vec::with_capacity(wire::HEADER + req.body.len());
    wire::put_header(&mut msg, req.command, if mid == 0 { 0 } else { 1 }, 64, 0, mid, 0, session);
    msg.extend_from_slice(&req.body);
    let out = match guard {
        Guard::Seal(k) => {
            let mut out = [&[0; seal::TRANSFORM][..], &msg].concat();
            k.seal(&mut out);
            frame(&out)
        }
        Guard::Sign(k) => {
            k.sign(&mut msg);
            frame(&msg)
        }
        Guard::None => frame(&msg),
    };
    s.write_all(&out).map_err(|e| SmbError::Connection(format!("send: {e}")))?;
    let deadline = Instant::now() + timeout;
    loop {
        let mut reply = read_frame(s, deadline)?;
        if let Guard::Seal(k) = guard {
            let mut plain = Vec::new();
            k.open(&reply, &mut plain).map_err(SmbError::Malformed)?;
            reply = plain;
        }
        let h = wire::parse_header(&reply).map_err(SmbError::Malformed)?;
        if h.flags & wire::FLAG_ASYNC != 0 && h.status == wire::STATUS_PENDING {
            continue;
        }
        return Ok((h, reply, msg));
    }
}

/// How a connection's set-up failed: the step, for the user's one-line error.
#[derive(Debug)]
pub enum SetupError {
    Dialect(String),
    Logon(String),
    Share(u32),
    Signing(String),
    Encryption(String),
    Other(String),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Dialect(e) | SetupError::Logon(e) | SetupError::Signing(e) | SetupError::Encryption(e) | SetupError::Other(e) => f.write_str(e),
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

/// What a connection's handshake set up.
struct Session {
    negotiated: Negotiated,
    id: u64,
    tree: u32,
    /// Credits granted beyond those the handshake spent.
    credits: u32,
    next_mid: u64,
    /// Present when every request is signed.
    signer: Option<Signer>,
    /// Present when every request is encrypted.
    sealer: Option<Sealer>,
}

/// NEGOTIATE, SESSION_SETUP (two legs of NTLMSSP) and TREE_CONNECT on a fresh connection.
fn handshake(s: &mut TcpStream, login: &Login, ip: &str) -> Result<Session, SetupError> {
    let other = |what: &str, e: SmbError| SetupError::Other(format!("{what}: {e}"));
    let offered = login.dialects.iter().map(|d| wire::dialect_name(*d)).collect::<Vec<_>>().join(", ");
    let mut rng = fresh_rng();
    let guid: [u8; 16] = rng.random();
    let mode = if login.signing == Signing::Required { wire::SIGNING_ENABLED | wire::SIGNING_REQUIRED } else { wire::SIGNING_ENABLED };
    let t = login.timeout;
    // Ciphers in order of preference (3.1.1); 3.0 and 3.0.2 know AES-128-CCM only.
    let ciphers: &[u16] = if login.encrypt == Encrypt::Off { &[] } else { &[seal::AES_128_GCM, seal::AES_128_CCM] };
    let (h, reply, sent) = exchange(s, &wire::negotiate(&login.dialects, guid, mode, rng.random(), ciphers), 0, 0, Guard::None, t).map_err(|e| match e {
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
    let no_cipher =
        |why: &str| SetupError::Encryption(format!("{why}, but the server offers no cipher peakbench speaks for SMB {}", wire::dialect_name(neg.dialect)));
    if login.encrypt == Encrypt::Required && neg.cipher.is_none() {
        return Err(no_cipher("encrypt=required"));
    }
    // Samba refuses a session or share that must be encrypted with STATUS_ACCESS_DENIED.
    let refused_unencrypted = |step: &str, status: u32| {
        let how = if login.encrypt == Encrypt::Off {
            "with encrypt=off".to_string()
        } else {
            format!("over SMB {}, which has no cipher", wire::dialect_name(neg.dialect))
        };
        (status == wire::STATUS_ACCESS_DENIED && neg.cipher.is_none()).then(|| {
            SetupError::Encryption(format!(
                "{step}: {} {how}: the server may require encryption; use encrypt=desired or encrypt=required with SMB 3.x",
                wire::status_name(status)
            ))
        })
    };
    let server_requires = neg.security_mode & wire::SIGNING_REQUIRED != 0;
    let sign_all = match login.signing {
        Signing::Off if server_requires => {
            return Err(SetupError::Signing("the server requires signed messages; use signing=if-offered or signing=required".into()))
        }
        Signing::Off => false,
        Signing::IfOffered => server_requires,
        Signing::Required => true,
    };
    let mut preauth = Preauth::new();
    if neg.dialect == wire::SMB311 {
        preauth.update(&sent);
        preauth.update(&reply);
    }
    let mut credits = h.credits as u32;
    let (h, reply1, sent1) =
        exchange(s, &wire::session_setup(&ntlm::negotiate_message(), mode), 1, 0, Guard::None, t).map_err(|e| other("SESSION_SETUP", e))?;
    credits += h.credits as u32;
    if h.status != wire::STATUS_MORE_PROCESSING_REQUIRED {
        return Err(SetupError::Logon(format!("SESSION_SETUP (NTLMSSP negotiate): {}", wire::status_name(h.status))));
    }
    let session = h.session;
    let token = wire::parse_session_setup(&reply1).map_err(|e| other("SESSION_SETUP", SmbError::Malformed(e)))?;
    let challenge = ntlm::parse_challenge(&token).map_err(SetupError::Other)?;
    let (auth, session_key) = ntlm::authenticate_message(&challenge, &login.user, &login.password, &login.domain, rng.random(), wire::filetime_now());
    let auth = wire::session_setup(&auth, mode);
    let (h, reply, sent2) = exchange(s, &auth, 2, session, Guard::None, t).map_err(|e| other("SESSION_SETUP", e))?;
    credits += h.credits as u32;
    if let Some(e) = refused_unencrypted("SESSION_SETUP", h.status) {
        return Err(e);
    }
    if h.status != wire::STATUS_SUCCESS {
        let who = if login.domain.is_empty() { login.user.clone() } else { format!("{}\\{}", login.domain, login.user) };
        return Err(SetupError::Logon(format!("SESSION_SETUP as {who}: {} (wrong user name or password?)", wire::status_name(h.status))));
    }
    if neg.dialect == wire::SMB311 {
        // The session's hash covers its SESSION_SETUP requests and every response but the last.
        for m in [&sent1, &reply1, &sent2] {
            preauth.update(m);
        }
    }
    let signer = Signer::new(neg.dialect, &session_key, &preauth);
    if h.flags & sign::FLAG_SIGNED != 0 && !signer.verify(&reply) {
        return Err(SetupError::Signing("SESSION_SETUP: the server's signature does not match (wrong password, or a different session key)".into()));
    }
    if sign_all && h.flags & sign::FLAG_SIGNED == 0 {
        return Err(SetupError::Signing("SESSION_SETUP: the server did not sign its answer although signing is required".into()));
    }
    let session_encrypts = wire::session_flags(&reply).map_err(|e| other("SESSION_SETUP", SmbError::Malformed(e)))? & wire::SESSION_FLAG_ENCRYPT_DATA != 0;
    let sealer = neg.cipher.map(|c| Sealer::new(neg.dialect, c, &session_key, &preauth, session, rng.random()));
    let mut seal_all = match login.encrypt {
        Encrypt::Required => true,
        _ => session_encrypts,
    };
    if seal_all && sealer.is_none() {
        return Err(no_cipher("the server asks for encryption"));
    }
    // SMB 3.1.1 signs TREE_CONNECT whatever the signing asked for (MS-SMB2 3.2.4.1.1), unless it is encrypted.
    let tree_guard = match (&sealer, &signer) {
        (Some(k), _) if seal_all => Guard::Seal(k),
        (_, k) if sign_all || neg.dialect == wire::SMB311 => Guard::Sign(k),
        _ => Guard::None,
    };
    let unc = format!("\\\\{ip}\\{}", login.share);
    let (h, reply, _) = exchange(s, &wire::tree_connect(&unc), 3, session, tree_guard, t).map_err(|e| other("TREE_CONNECT", e))?;
    credits += h.credits as u32;
    if let Some(e) = refused_unencrypted("TREE_CONNECT", h.status) {
        return Err(e);
    }
    if h.status != wire::STATUS_SUCCESS {
        return Err(SetupError::Share(h.status));
    }
    if h.flags & sign::FLAG_SIGNED != 0 && !signer.verify(&reply) {
        return Err(SetupError::Signing("TREE_CONNECT: the server's signature does not match".into()));
    }
    if wire::share_flags(&reply).map_err(|e| other("TREE_CONNECT", SmbError::Malformed(e)))? & wire::SHAREFLAG_ENCRYPT_DATA != 0
        && login.encrypt != Encrypt::Off
    {
        seal_all = true;
        if sealer.is_none() {
            return Err(no_cipher("the share asks for encryption"));
        }
    }
    let sealer = sealer.filter(|_| seal_all);
    // Each handshake message cost one credit, except NEGOTIATE.
    let signer = (sign_all && sealer.is_none()).then_some(signer);
    Ok(Session { negotiated: neg, id: session, tree: h.tree, credits: credits.saturating_sub(3), next_mid: 4, signer, sealer })
}

impl Client {
    pub fn new(addr: SocketAddr, login: Login, conns: usize, max_outstanding: Option<usize>) -> Client {
        let stray_replies = Arc::new(AtomicU64::new(0));
        Client {
            addr,
            login,
            conns: (0..conns.max(1)).map(|_| Conn { live: Mutex::new((None, None)) }).collect(),
            retiring: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            generations: AtomicU64::new(0),
            max_outstanding,
            inflight: InflightCap::new(max_outstanding),
            stray_replies: stray_replies.clone(),
            reconnects: AtomicU64::new(0),
            reauthentications: AtomicU64::new(0),
            stats: ReceiveStats {
                stray: stray_replies,
                reads: AtomicU64::new(0),
                holds: AtomicU64::new(0),
                held_ns: AtomicU64::new(0),
                longest_hold_ns: AtomicU64::new(0),
            },
            want_read: Mutex::new(Vec::new()),
            want_read_count: AtomicUsize::new(0),
            send_slack_ns: AtomicU64::new(0),
        }
    }

    /// How receive moderation held responses back (the result's `receive_moderation`, as NFS's
    /// adaptive one reports it): latencies include it.
    pub fn moderation_report(&self) -> serde_json::Value {
        let s = &self.stats;
        let holds = s.holds.load(Relaxed);
        serde_json::json!({
            "mode": "adaptive",
            "reads": s.reads.load(Relaxed),
            "holds": holds,
            "mean_hold_us": if holds > 0 { s.held_ns.load(Relaxed) as f64 / 1e3 / holds as f64 } else { 0.0 },
            "max_hold_us": s.longest_hold_ns.load(Relaxed) as f64 / 1e3,
            "hold_fraction_of_latency": ADAPTIVE_HOLD_FRACTION,
            "hold_cap_us": ADAPTIVE_HOLD_CAP.as_secs_f64() * 1e6,
            "send_slack_fraction_of_hold": 1.0 / SEND_SLACK_OF_HOLD as f64,
        })
    }

    /// How late the leading sender may send a request, so that one write (and one wake-up) sends
    /// the requests due meanwhile too: half of receive moderation's bound, which has many requests
    /// in flight and is at most a tenth of the observed latency (or 200 us). Half, so that the
    /// sender's whole wait (to the next due time, plus this) can still be a hold when requests are
    /// due at least every half bound; zero with few in flight.
    pub fn send_slack(&self) -> Duration {
        Duration::from_nanos(self.send_slack_ns.load(Relaxed))
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
        let mut expired = false;
        if let Some(l) = &g.0 {
            expired = l.expired.load(Relaxed);
            if !l.dead.load(Relaxed) && !expired {
                return Ok(l.clone());
            }
            if expired && !l.dead.load(Relaxed) {
                // Its responses still come: keep reading it until it closes itself (`read_now`).
                self.retiring.lock().expect("retiring lock").push(l.clone());
            }
        }
        if let Some(last) = g.1 {
            if !force && last.elapsed() < REDIAL_EVERY {
                return Err(SetupError::Other(format!("{} is down (redial pending)", self.addr)));
            }
            if expired {
                self.reauthentications.fetch_add(1, Relaxed);
            } else {
                self.reconnects.fetch_add(1, Relaxed);
            }
        }
        g.1 = Some(Instant::now());
        let connect_timeout = self.login.timeout.clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut stream = TcpStream::connect_timeout(&self.addr, connect_timeout).map_err(|e| SetupError::Other(format!("connect to {}: {e}", self.addr)))?;
        let _ = stream.set_nodelay(true);
        // A server that stops reading fills the socket's buffer: a send then fails instead of blocking for good.
        let _ = stream.set_write_timeout(Some(self.login.timeout));
        let Session { negotiated, id: session, tree, credits, next_mid, signer, sealer } = handshake(&mut stream, &self.login, &self.addr.ip().to_string())?;
        let reader = stream.try_clone().map_err(|e| SetupError::Other(e.to_string()))?;
        let rx = Rx { frames: Frames::new(), plain: Vec::new(), done: Vec::new(), last_expire: Instant::now(), observed_latency_s: 0.0, hold: None };
        let live = Arc::new(Live {
            writer: Mutex::new(stream),
            reader,
            rx: Mutex::new(rx),
            send: Mutex::new(Outbox { next_mid, credits, queued: Vec::with_capacity(64 * 1024) }),
            pending: Mutex::new(HashMap::default()),
            calls: AtomicUsize::new(0),
            dead: AtomicBool::new(false),
            expired: AtomicBool::new(false),
            session,
            tree,
            signer,
            sealer,
            negotiated,
            generation: self.generations.fetch_add(1, Relaxed) + 1,
        });
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

    /// A request, waiting for its responses (reading them itself, or letting whoever reads hand them over).
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
                // Woken for the reading, perhaps, but answered: the next waiter reads instead.
                self.wake_a_reader();
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                // A read expires it; this bound holds even if no read comes.
                return Err(SmbError::Timeout);
            }
            self.receive(&[live], deadline - now);
        }
    }

    /// Read every connection's responses that have arrived and complete what they answer,
    /// waiting up to `timeout` for the first. What a connection's receive moderation holds
    /// back is not read before its hold ends. Completions run on the calling thread.
    pub fn poll(&self, timeout: Duration) {
        let alive = |c: &Conn| c.live.lock().expect("conn lock").0.clone().filter(|l| !l.dead.load(Relaxed));
        let mut lives: Vec<Arc<Live>> = self.conns.iter().filter_map(alive).collect();
        {
            let mut retiring = self.retiring.lock().expect("retiring lock");
            if !retiring.is_empty() {
                retiring.retain(|l| !l.dead.load(Relaxed));
                lives.extend(retiring.iter().cloned());
            }
        }
        self.receive(&lives.iter().map(|l| &**l).collect::<Vec<_>>(), timeout);
    }

    /// `poll` on some connections. Where another thread is reading, wait (up to `timeout`) for
    /// it to finish a read instead: it completes this thread's requests too.
    fn receive(&self, lives: &[&Live], timeout: Duration) {
        // Each connection held, and whether to read it at once (rather than ask ppoll first).
        let mut held: Vec<(&Live, MutexGuard<Rx>, bool)> = lives.iter().filter_map(|l| l.rx.try_lock().ok().map(|rx| (*l, rx, timeout.is_zero()))).collect();
        if held.is_empty() {
            if !lives.is_empty() {
                self.wait_to_read(timeout, lives);
            } else {
                std::thread::sleep(timeout); // nothing connected: nothing can complete meanwhile
            }
            return;
        }
        let start = Instant::now();
        let deadline = start + timeout;
        for (live, rx, _) in held.iter_mut() {
            // With many requests in flight, a wait no longer than NFS's adaptive hold need not watch
            // for responses: those that come meanwhile are read at its end, late by at most that,
            // and the wait costs no wake-up per response.
            let bound = hold_after_read(Moderation::Adaptive, live.calls.load(Relaxed), 0, Duration::from_secs_f64(rx.observed_latency_s));
            self.send_slack_ns.store(bound.as_nanos() as u64 / SEND_SLACK_OF_HOLD, Relaxed);
            if rx.hold.is_none() && !timeout.is_zero() && timeout <= bound {
                rx.hold = Some((start, deadline));
                self.stats.holds.fetch_add(1, Relaxed);
            }
        }
        let mut fds = Vec::with_capacity(held.len());
        let mut watched = Vec::with_capacity(held.len());
        loop {
            let now = Instant::now();
            // No wait outlasts EXPIRE_EVERY: the requests whose time is up are failed in time.
            let (mut got, mut wake) = (false, deadline.min(now + EXPIRE_EVERY));
            fds.clear();
            watched.clear();
            for (i, (live, rx, read)) in held.iter_mut().enumerate() {
                match rx.hold {
                    Some((_, until)) if until > now => {
                        wake = wake.min(until);
                        continue;
                    }
                    Some(_) => *read = true, // its hold is over: what came meanwhile waits
                    None => {}
                }
                if *read {
                    match live.read_now(rx, &self.stats, now) {
                        Read::Some | Read::Dead => {
                            got = true;
                            continue;
                        }
                        Read::Nothing => *read = false,
                    }
                }
                fds.push(libc::pollfd { fd: live.reader.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                watched.push(i);
            }
            if got || now >= deadline {
                break;
            }
            if fds.is_empty() {
                std::thread::sleep(wake - now); // every connection is on hold
                continue;
            }
            let ready = wait_readable(&mut fds, wake - now);
            for (fd, i) in fds.iter().zip(&watched) {
                held[*i].2 |= fd.revents != 0;
            }
            if !ready && wake == deadline {
                break; // timed out with nothing to read: no read to find that out again
            }
        }
        let now = Instant::now();
        for (live, rx, _) in held.iter_mut() {
            live.expire_due(rx, now);
        }
        drop(held);
        // Pairs with `wait_to_read`'s fence: either it sees the lock free or this sees it waiting.
        std::sync::atomic::fence(SeqCst);
        self.wake_a_reader();
    }

    /// Wake one thread waiting to read, to take over the reading (it wakes the next when it is
    /// done): waking them all after every read had dozens of blocking callers race for the
    /// lock on two cores.
    fn wake_a_reader(&self) {
        if self.want_read_count.load(SeqCst) > 0 {
            if let Some(t) = self.want_read.lock().expect("want-read lock").pop() {
                t.unpark();
            }
        }
    }

    /// Another thread is reading: park until it has finished a read (or `timeout`).
    fn wait_to_read(&self, timeout: Duration, lives: &[&Live]) {
        self.want_read.lock().expect("want-read lock").push(std::thread::current());
        self.want_read_count.fetch_add(1, SeqCst);
        std::sync::atomic::fence(SeqCst);
        // A reader that finished before the registration woke nobody: look once more before parking.
        // (Every wait is still bounded: the one for a response by EXPIRE_EVERY.)
        if lives.iter().all(|l| l.rx.try_lock().is_err()) {
            std::thread::park_timeout(timeout.min(EXPIRE_EVERY));
        }
        // Woken by its own response, or timed out: a wake-up meant for a waiter must not come here.
        let me = std::thread::current().id();
        self.want_read.lock().expect("want-read lock").retain(|t| t.id() != me);
        self.want_read_count.fetch_sub(1, SeqCst);
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

/// The messages of a frame: itself, or what it decrypts to (into `plain`) on an encrypted session.
fn frame_messages<'a>(frame: &'a [u8], sealer: Option<&Sealer>, plain: &'a mut Vec<u8>) -> Result<Vec<(Header, &'a [u8])>, String> {
    match sealer {
        Some(k) => {
            k.open(frame, plain)?;
            messages(plain)
        }
        None => messages(frame),
    }
}

/// SMB2 frames (Direct TCP) split out of the bytes read.
pub struct Frames {
    b: ReadBuf,
}

pub enum Frame {
    /// Where the next whole frame's message(s) lie in `Frames::get`.
    Whole(Range<usize>),
    Incomplete,
    /// A length no SMB2 frame has: nothing after it can be trusted.
    Broken(SmbError),
}

impl Frames {
    pub fn new() -> Frames {
        Frames { b: ReadBuf::new(wire::MAX_FRAME + 4) }
    }

    pub fn space(&mut self) -> &mut [u8] {
        self.b.space()
    }

    pub fn filled(&mut self, n: usize) {
        self.b.filled(n)
    }

    pub fn get(&self, frame: Range<usize>) -> &[u8] {
        self.b.get(frame)
    }

    pub fn next(&mut self) -> Frame {
        let b = self.b.unread();
        let Some(head) = b.get(..4) else { return Frame::Incomplete };
        let n = match frame_len(head.try_into().expect("4 bytes")) {
            Ok(n) => n,
            Err(e) => return Frame::Broken(e),
        };
        if b.len() < 4 + n {
            return Frame::Incomplete;
        }
        let first = self.b.start + 4;
        self.b.start = first + n;
        Frame::Whole(first..first + n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response message: header (with `next` and `mid`) and body.
    fn response(command: u16, mid: u64, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        wire::put_header(&mut m, command, 0, 1, 0x1, mid, 1, 7);
        m.extend_from_slice(body);
        m
    }

    /// The session key and ID of the sealed frames in these tests.
    const KEY: [u8; 16] = [7; 16];
    const SESSION: u64 = 7;

    /// A client's sealer, and the server's that seals its replies.
    fn sealers(dialect: u16, cipher: u16) -> (Sealer, Sealer) {
        let preauth = Preauth::new();
        (Sealer::new(dialect, cipher, &KEY, &preauth, SESSION, 1), Sealer::server_side(dialect, cipher, &KEY, &preauth, SESSION))
    }

    /// A frame's bytes (after its length) inside a transform header, sealed and framed again.
    fn sealed(server: &Sealer, framed: &[u8]) -> Vec<u8> {
        let mut out = [&[0; seal::TRANSFORM][..], &framed[4..]].concat();
        server.seal(&mut out);
        frame(&out)
    }

    fn framed(msgs: &[Vec<u8>]) -> Vec<u8> {
        // A compound: each message but the last padded to 8 bytes and pointing at the next.
        let mut out = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let mut m = m.clone();
            if i + 1 < msgs.len() {
                m.resize(m.len().next_multiple_of(8), 0);
                let next = m.len() as u32;
                m[20..24].copy_from_slice(&next.to_le_bytes());
            }
            out.extend_from_slice(&m);
        }
        frame(&out)
    }

    /// Everything the reader and the ops do with a server's bytes: frames, compounds, and
    /// each body decoder the target calls on a response.
    fn decode_all(input: &[u8], step: usize, sealer: Option<&Sealer>) {
        let (mut frames, mut rest, mut plain) = (Frames::new(), input, Vec::new());
        while !rest.is_empty() {
            let space = frames.space();
            let n = space.len().min(step).min(rest.len());
            space[..n].copy_from_slice(&rest[..n]);
            frames.filled(n);
            rest = &rest[n..];
            loop {
                match frames.next() {
                    Frame::Whole(r) => {
                        let Ok(msgs) = frame_messages(frames.get(r), sealer, &mut plain) else { return };
                        for (_, m) in msgs {
                            let _ = (wire::parse_negotiate(m), wire::parse_create(m), wire::parse_read(m), wire::parse_write(m));
                            if let Ok(token) = wire::parse_session_setup(m) {
                                let _ = ntlm::parse_challenge(&token);
                            }
                            if let Ok(out) = wire::parse_output(m) {
                                let _ = (wire::parse_names(out, wire::FILE_NAMES_INFO), wire::parse_names(out, wire::FILE_ID_BOTH_DIR_INFO));
                                let _ = (wire::parse_standard(out), wire::parse_fs_full_size(out), wire::parse_fs_attribute(out));
                            }
                        }
                    }
                    Frame::Incomplete => break,
                    Frame::Broken(_) => return,
                }
            }
        }
    }

    #[test]
    fn frames_split_compounds_and_refuse_impossible_lengths() {
        let echo = response(wire::ECHO, 5, &[4, 0, 0, 0]);
        let read = response(wire::READ, 6, &[17, 0, 80, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'd', b'a', b't', b'a']);
        let stream = [framed(&[echo.clone(), read]), framed(std::slice::from_ref(&echo))].concat();
        let mut frames = Frames::new();
        let space = frames.space();
        space[..stream.len()].copy_from_slice(&stream);
        frames.filled(stream.len());
        let Frame::Whole(first) = frames.next() else { panic!("a whole frame") };
        let msgs = messages(frames.get(first)).unwrap();
        assert_eq!(msgs.iter().map(|(h, _)| h.mid).collect::<Vec<_>>(), [5, 6]);
        assert_eq!(wire::parse_read(msgs[1].1).unwrap(), b"data");
        assert!(matches!(frames.next(), Frame::Whole(_)));
        assert!(matches!(frames.next(), Frame::Incomplete));
        // A NetBIOS length shorter than an SMB2 header, or with its top byte set, breaks the stream.
        for head in [[0u8, 0, 0, 40], [1, 0, 0, 68]] {
            let mut frames = Frames::new();
            frames.space()[..4].copy_from_slice(&head);
            frames.filled(4);
            assert!(matches!(frames.next(), Frame::Broken(SmbError::Malformed(_))), "{head:?}");
        }
        for step in [1, 7, 4096] {
            decode_all(&stream, step, None);
        }
    }

    #[test]
    fn sealed_frames_open_to_their_messages_even_several_in_one_read() {
        let echo = response(wire::ECHO, 5, &[4, 0, 0, 0]);
        let read = response(wire::READ, 6, &[17, 0, 80, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'd', b'a', b't', b'a']);
        for cipher in [seal::AES_128_CCM, seal::AES_128_GCM] {
            let (client, server) = sealers(wire::SMB311, cipher);
            let stream = [sealed(&server, &framed(&[echo.clone(), read.clone()])), sealed(&server, &framed(std::slice::from_ref(&echo)))].concat();
            let mut frames = Frames::new();
            frames.space()[..stream.len()].copy_from_slice(&stream);
            frames.filled(stream.len());
            let mut plain = Vec::new();
            let mut mids = Vec::new();
            while let Frame::Whole(r) = frames.next() {
                let msgs = frame_messages(frames.get(r), Some(&client), &mut plain).unwrap();
                mids.extend(msgs.iter().map(|(h, _)| h.mid));
                if msgs.len() == 2 {
                    assert_eq!(wire::parse_read(msgs[1].1).unwrap(), b"data");
                }
            }
            assert_eq!(mids, [5, 6, 5]);
            // A plain frame on an encrypted session, or a sealed one under another key, is refused.
            let plain_frame = framed(std::slice::from_ref(&echo));
            assert!(frame_messages(&plain_frame[4..], Some(&client), &mut plain).is_err());
            let (_, stranger) = sealers(0x0300, seal::AES_128_CCM);
            assert!(frame_messages(&sealed(&stranger, &plain_frame)[4..], Some(&client), &mut plain).is_err());
        }
    }

    #[test]
    #[ignore = "fuzzing: run by scripts/fuzz.sh"]
    fn fuzz_smb2_reply() {
        let echo = response(wire::ECHO, 5, &[4, 0, 0, 0]);
        let read = response(wire::READ, 6, &[17, 0, 80, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'd', b'a', b't', b'a']);
        let mut names = vec![9, 0, 72, 0, 16, 0, 0, 0];
        names.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'a', 0, 0, 0]);
        let query = response(wire::QUERY_INFO, 7, &names);
        let mut challenge = b"NTLMSSP\0\x02\0\0\0".to_vec();
        challenge.resize(48, 0);
        challenge[40] = 4;
        challenge[44] = 48;
        challenge.extend_from_slice(&[0; 4]);
        let mut setup = vec![9, 0, 0, 0, 72, 0, challenge.len() as u8, 0];
        setup.extend_from_slice(&challenge);
        let setup = response(wire::SESSION_SETUP, 2, &setup);
        let seeds: Vec<Vec<u8>> = vec![
            framed(std::slice::from_ref(&echo)),
            framed(&[query, read]),
            framed(&[setup]),
            [framed(std::slice::from_ref(&echo)), framed(&[echo])].concat(),
        ];
        // Transform-framed replies too: as they came (mostly failing their tag), and with the
        // input's bytes sealed as the server would, so what lies inside an intact seal is fuzzed.
        let (client, server) = sealers(wire::SMB311, seal::AES_128_GCM);
        let mut seeds: Vec<Vec<u8>> = seeds.iter().flat_map(|s| [s.clone(), sealed(&server, s)]).collect();
        let echo = framed(&[response(wire::ECHO, 8, &[4, 0, 0, 0])]);
        seeds.push([sealed(&server, &echo), sealed(&server, &echo)].concat());
        let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
        crate::fuzz::fuzz("smb2 reply", &seeds, |input| {
            let step = 1 + input.last().copied().unwrap_or(0) as usize * 97;
            decode_all(input, step, None);
            decode_all(input, step, Some(&client));
            // Two sealed frames in one stream, split where the input's first byte says.
            let cut = input.first().map_or(0, |b| *b as usize % (input.len() + 1));
            let as_frame = |b: &[u8]| [&(b.len() as u32).to_be_bytes()[..], b].concat();
            let stream = [sealed(&server, &as_frame(&input[..cut])), sealed(&server, &as_frame(&input[cut..]))].concat();
            decode_all(&stream, step, Some(&client));
        });
    }
}
