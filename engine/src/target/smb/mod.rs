//! An SMB2/3 file server spoken to directly (SMB 2.1, 3.0, 3.0.2, 3.1.1 over TCP, NTLMv2, signed if asked):
//! no kernel client's caching or queueing stands between the load and the server.
//! The op vocabulary maps onto SMB2 commands as a Windows client issues them:
//!
//! | op | SMB2 | how |
//! |---|---|---|
//! | null | ECHO | |
//! | getattr | query path info | CREATE + QUERY_INFO(FileNetworkOpenInformation) + CLOSE, one compound |
//! | access | query security | CREATE + QUERY_INFO(security: owner, group, DACL) + CLOSE |
//! | setattr | set file info | CREATE + SET_INFO(FileBasicInformation: last-write time) + CLOSE |
//! | lookup | open and close | CREATE + CLOSE |
//! | read, write, commit | READ, WRITE, FLUSH | on the file's handle, opened once and kept; a read or write over 64 KiB is several, one after another, before the file's close |
//! | lock | LOCK + LOCK (unlock), one compound | the file's first byte, on its kept handle |
//! | open, close | CREATE, CLOSE | a Markov workload's handle, kept from one to the other |
//! | fgetattr, fsetattr, getsecurity | QUERY_INFO, SET_INFO(FileBasicInformation), QUERY_INFO(security) | on that handle |
//! | create, mkdir | CREATE (new) + CLOSE | |
//! | remove, rmdir | CREATE (delete on close) + CLOSE | a remove after the CLOSE of the file's kept handle |
//! | rename, link | CREATE + SET_INFO(FileRenameInformation, FileLinkInformation) + CLOSE | a rename after the CLOSE of the file's kept handle |
//! | readdir, readdirplus | CREATE + QUERY_DIRECTORY, QUERY_DIRECTORY..., CLOSE | names; names with ids and attributes; each when the one before answers |
//! | fsstat, fsinfo | CREATE + QUERY_INFO(FileFsFullSize, FileFsAttribute) + CLOSE | on the root |
//!
//! Every op goes out without blocking a sender thread; one of several round trips (a listing, a remove or
//! rename after a CLOSE) sends each message when the one before answers.
//!
//! symlink, readlink and pathconf have no SMB2 counterpart (Samba makes no symlinks
//! for an SMB2 client): a mix naming them is refused before the trial.

pub mod conn;
pub mod ntlm;
pub mod seal;
pub mod sign;
pub mod wire;

use super::{Completion, FileStore, Outcome, Request, Target};
use crate::op::{Attr, HandleOp, Kind, Op, Reply};
use crate::spec::SmbSpec;
use anyhow::{anyhow, bail};
use conn::{Client, Live, Login, Replies, Res, SetupError, SmbError};
use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wire::{Fid, Req, RELATED_FID};

/// Largest transfer per READ or WRITE: one credit's worth, as most clients use.
const MAX_XFER: u32 = 65536;
const DIR_PAGE: u32 = 65536;

pub struct Smb {
    pub url: String,
    client: Arc<Client>,
    /// The directory below the share that holds the file sets ("" for the share's root).
    base: String,
    /// The file set's root (`base/id`) once entered.
    root: String,
    /// Open handles for reads, writes and flushes, by path and connection generation.
    handles: Arc<Mutex<HashMap<String, (u64, Fid)>>>,
    /// Paths whose `open` is in flight, each with the ops on its handle started meanwhile: they
    /// are sent, in order, when the open's reply brings the handle (a blocking op waits for it).
    opening: Arc<Opening>,
    /// Reads and writes of several messages in progress on each handle, which its close waits for.
    in_use: Arc<InUse>,
    /// How long an op waits for its handle's `open` (the per-request timeout).
    timeout: Duration,
    xfer: u32,
    /// The bytes writes send (shared with the transfers still sending them).
    content: Arc<crate::content::Writes>,
}

fn status(msg: &[u8]) -> Res<wire::Header> {
    wire::parse_header(msg).map_err(SmbError::Malformed)
}

/// The first failure among a compound's responses (a failed CREATE fails the rest too).
fn check(replies: &Replies, ok_too: &[u32]) -> Res<()> {
    for r in replies {
        let h = status(r)?;
        if h.status != wire::STATUS_SUCCESS && !ok_too.contains(&h.status) {
            return Err(SmbError::Status(h.status));
        }
    }
    Ok(())
}

fn malformed(e: String) -> SmbError {
    SmbError::Malformed(e)
}

/// What the SMB2 version of each op sends, for the ops that are one compound; `Blocking` for those
/// that take several round trips (`chained`, sent without blocking all the same) or a handle not yet open.
enum Plan {
    /// Send these; the outcome is the bytes `bytes` finds in the responses.
    Compound(Vec<Req>, fn(&Replies) -> Res<u64>),
    Blocking,
}

fn zero(r: &Replies) -> Res<u64> {
    check(r, &[]).map(|_| 0)
}

fn read_bytes(r: &Replies) -> Res<u64> {
    let h = status(&r[0])?;
    if h.status == wire::STATUS_END_OF_FILE {
        return Ok(0);
    }
    check(r, &[])?;
    wire::parse_read(&r[0]).map(|d| d.len() as u64).map_err(malformed)
}

fn written(r: &Replies) -> Res<u64> {
    check(r, &[])?;
    wire::parse_write(&r[0]).map(u64::from).map_err(malformed)
}

/// The only response's output (QUERY_INFO on a handle), its length.
fn first_info(r: &Replies) -> Res<u64> {
    check(r, &[])?;
    wire::parse_output(&r[0]).map(|o| o.len() as u64).map_err(malformed)
}

/// A handle for every op a file's handle serves: data, attributes and its security descriptor.
fn open_handle(path: &str) -> Req {
    let access = wire::FILE_READ_DATA | wire::FILE_WRITE_DATA | wire::FILE_READ_ATTRIBUTES | wire::FILE_WRITE_ATTRIBUTES | wire::READ_CONTROL;
    wire::create(path, access, 0, wire::OPEN, wire::NON_DIRECTORY_FILE)
}

/// An op that will be sent once its handle's open has answered: with the handle, or the error it then fails with.
type Deferred = Box<dyn FnOnce(Result<Fid, String>) + Send>;

/// What an `open` learns: its outcome, once the handle is kept.
type Opened = Box<dyn FnOnce(Res<u64>) + Send>;

/// What waits on an open in flight, in the order it was started: ops on its handle, and a later open of
/// the same path (the workload closed the file and opened it again), which the ops after it wait on.
enum Waiting {
    Op(Deferred),
    Reopen(Arc<Live>, Opened),
}

/// The paths whose open is in flight, with what waits on each (a blocking waiter polls for it).
type Opening = Mutex<HashMap<String, Vec<Waiting>>>;

/// The state an `open`'s reply updates: the kept handles, the opens in flight, and the client to send on.
#[derive(Clone)]
struct OpenState {
    handles: Arc<Mutex<HashMap<String, (u64, Fid)>>>,
    opening: Arc<Opening>,
    client: Arc<Client>,
}

impl OpenState {
    /// Send the open of a path already marked in flight in `opening`. Its reply keeps the handle and
    /// sends what waited on it in order, up to a reopen, which is sent next with the rest waiting on it.
    /// If it fails, what waited fails with EBADF after a workload's `open` (there is no handle), and
    /// with the open's own error after an `implicit` one (the first op on a file opens it).
    fn send(self, live: &Live, full: String, implicit: bool, done: Opened) {
        let generation = live.generation;
        let client = self.client.clone();
        client.call_async(
            live,
            &[open_handle(&full)],
            Box::new(move |r| {
                let created = r.and_then(|r| check(&r, &[]).and_then(|_| wire::parse_create(&r[0]).map_err(malformed)));
                if let Ok(c) = &created {
                    self.handles.lock().expect("handles lock").insert(full.clone(), (generation, c.fid));
                }
                let fid = match &created {
                    Ok(c) => Ok(c.fid),
                    Err(e) if implicit => Err(e.kind()),
                    Err(_) => Err("EBADF".to_string()),
                };
                // Under the lock, so that an op started now either joins those waiting or finds the handle.
                let mut waiting = self.opening.lock().expect("opening lock");
                let mut queue = waiting.remove(&full).unwrap_or_default().into_iter();
                let (mut sent, mut reopen) = (false, None);
                for next in queue.by_ref() {
                    match next {
                        Waiting::Op(send) => {
                            send(fid.clone());
                            sent = true;
                        }
                        Waiting::Reopen(live, opened) => {
                            reopen = Some((live, opened));
                            break;
                        }
                    }
                }
                if reopen.is_some() {
                    waiting.insert(full.clone(), queue.collect());
                }
                drop(waiting);
                if sent {
                    self.client.flush();
                }
                // Sent without the lock: a reply that fails at once runs this callback again on this thread.
                if let Some((live, opened)) = reopen {
                    self.clone().send(&live, full, false, opened);
                    self.client.flush();
                }
                done(created.map(|_| 0));
            }),
        );
    }
}

/// A close waiting for the reads and writes in progress on its handle.
type Close = Box<dyn FnOnce() + Send>;

/// A kept handle: its connection's generation and its file id.
type HandleId = (u64, Fid);

/// Queue the CLOSE of a handle, `done` getting its outcome.
fn closing(client: Arc<Client>, live: Arc<Live>, fid: Fid, done: Completion) -> Close {
    Box::new(move || client.call_async(&live, &[wire::close(&fid)], Box::new(move |r| done(r.and_then(|r| zero(&r)).map_err(|e| e.kind()), 0))))
}

/// The reads and writes of several messages in progress on each handle (by connection generation and
/// handle), and the closes waiting for the last of them: a close sent between two of a read's READs
/// would have the rest answered STATUS_FILE_CLOSED, an error of the load and not of the server.
struct InUse {
    client: Arc<Client>,
    /// Per handle: how many reads and writes are in progress on it, and the closes waiting for them.
    by_handle: Mutex<HashMap<HandleId, (usize, Vec<Close>)>>,
}

/// One read or write holding its handle in use until dropped.
struct Using {
    in_use: Arc<InUse>,
    handle: HandleId,
}

impl InUse {
    fn enter(self: &Arc<Self>, handle: HandleId) -> Using {
        self.by_handle.lock().expect("in-use lock").entry(handle).or_insert_with(|| (0, Vec::new())).0 += 1;
        Using { in_use: self.clone(), handle }
    }

    /// Send `close` (it queues the CLOSE) now if nothing is in progress on the handle, else once the last
    /// read or write on it has answered.
    fn close_after(&self, handle: HandleId, close: Close) {
        let mut by_handle = self.by_handle.lock().expect("in-use lock");
        match by_handle.get_mut(&handle) {
            Some((_, closes)) => closes.push(close),
            None => {
                drop(by_handle);
                close();
            }
        }
    }
}

impl Drop for Using {
    fn drop(&mut self) {
        let mut by_handle = self.in_use.by_handle.lock().expect("in-use lock");
        let Some((users, _)) = by_handle.get_mut(&self.handle) else { return };
        *users -= 1;
        if *users > 0 {
            return;
        }
        let (_, closes) = by_handle.remove(&self.handle).expect("an entry (above)");
        drop(by_handle);
        if !closes.is_empty() {
            closes.into_iter().for_each(|close| close());
            self.in_use.client.flush();
        }
    }
}

/// A read or write larger than one message, sent without blocking: READs or WRITEs of at most `chunk`
/// bytes, each when the one before has answered (as `Smb::logical_read` does on a blocking sender).
struct Transfer {
    client: Arc<Client>,
    live: Arc<Live>,
    fid: Fid,
    /// The content a write sends; None for a read.
    writes: Option<Arc<crate::content::Writes>>,
    offset: u64,
    len: u64,
    chunk: u64,
    moved: u64,
    _using: Using,
    done: Completion,
}

impl Transfer {
    /// Send the next message; its answer sends the one after or completes the transfer.
    fn next(mut self) {
        let (at, n) = (self.offset + self.moved, (self.len - self.moved).min(self.chunk));
        let message = match &self.writes {
            Some(content) => wire::write(&self.fid, at, content.at(at, n as usize)),
            None => wire::read(&self.fid, at, n as u32),
        };
        let (client, live) = (self.client.clone(), self.live.clone());
        client.call_async(
            &live,
            &[message],
            Box::new(move |r| {
                let got = r.and_then(|r| if self.writes.is_some() { written(&r) } else { read_bytes(&r) });
                let got = match got {
                    Ok(0) if self.writes.is_some() => Err(SmbError::Malformed("the server wrote nothing".into())),
                    other => other,
                };
                match got {
                    Ok(k) => {
                        self.moved += k;
                        // A read shorter than asked has met the end of the file.
                        if self.moved < self.len && (self.writes.is_some() || k == n) {
                            let client = self.client.clone();
                            self.next();
                            client.flush();
                            return;
                        }
                        (self.done)(Ok(self.moved), 0);
                    }
                    Err(e) => (self.done)(Err(e.kind()), 0),
                }
            }),
        );
    }
}

/// What a directory listing learns: the bytes of its pages and the names in them (without . and ..).
type Listed = Box<dyn FnOnce(Res<(u64, Vec<String>)>) + Send>;

/// A directory listing sent without blocking: CREATE + QUERY_DIRECTORY as one compound, each further
/// QUERY_DIRECTORY when the one before answers, until STATUS_NO_MORE_FILES, then the CLOSE, whose answer
/// completes it. A blocking listing held a sender thread for all those round trips: a stalled server made
/// the trial spawn one per readdir.
struct Listing {
    client: Arc<Client>,
    live: Arc<Live>,
    class: u8,
    bytes: u64,
    names: Vec<String>,
    done: Listed,
}

impl Listing {
    fn start(self, full: &str) {
        let open = wire::create(full, wire::FILE_READ_DATA | wire::FILE_READ_ATTRIBUTES, 0, wire::OPEN, wire::DIRECTORY_FILE);
        let (client, live) = (self.client.clone(), self.live.clone());
        let first = [open, wire::query_directory(&RELATED_FID, self.class, true, DIR_PAGE)];
        client.call_async(
            &live,
            &first,
            Box::new(move |r| {
                let opened = r.and_then(|r| {
                    let h = status(&r[0])?;
                    if h.status != wire::STATUS_SUCCESS {
                        return Err(SmbError::Status(h.status));
                    }
                    Ok((wire::parse_create(&r[0]).map_err(malformed)?.fid, r))
                });
                match opened {
                    Ok((fid, r)) => self.page(fid, &r[1]),
                    Err(e) => (self.done)(Err(e)),
                }
            }),
        );
    }

    /// A QUERY_DIRECTORY's answer: its names kept, then the next page asked for, or the handle closed.
    fn page(mut self, fid: Fid, msg: &[u8]) {
        let listed = (|| {
            let h = status(msg)?;
            if h.status == wire::STATUS_NO_MORE_FILES {
                return Ok(true);
            }
            if h.status != wire::STATUS_SUCCESS {
                return Err(SmbError::Status(h.status));
            }
            let page = wire::parse_output(msg).map_err(malformed)?;
            self.bytes += page.len() as u64;
            self.names.extend(wire::parse_names(page, self.class).map_err(malformed)?.into_iter().filter(|n| n != "." && n != ".."));
            if self.names.len() > 10_000_000 {
                return Err(SmbError::Malformed("directory listing never ends".into()));
            }
            Ok(false)
        })();
        match listed {
            Ok(false) => {
                let (client, live) = (self.client.clone(), self.live.clone());
                client.call_async(
                    &live,
                    &[wire::query_directory(&fid, self.class, false, DIR_PAGE)],
                    Box::new(move |r| match r {
                        Ok(r) => self.page(fid, &r[0]),
                        Err(e) => self.close(fid, Err(e)),
                    }),
                );
                client.flush();
            }
            Ok(true) => self.close(fid, Ok(())),
            Err(e) => self.close(fid, Err(e)),
        }
    }

    /// Close the directory; the listing completes with its first failure, or its pages once the close answers.
    fn close(self, fid: Fid, listed: Res<()>) {
        let (client, live) = (self.client.clone(), self.live.clone());
        client.call_async(&live, &[wire::close(&fid)], Box::new(move |r| (self.done)(listed.and_then(|_| check(&r?, &[])).map(|_| (self.bytes, self.names)))));
        client.flush();
    }
}

/// Whether an op takes several round trips, sent one after another without blocking (`Smb::start_chained`).
fn chained(request: &Request) -> bool {
    matches!(request, Request::Readdir { .. } | Request::Remove { .. } | Request::Rename { .. } | Request::Link { .. })
}

/// A request's messages and how its outcome is read from the responses.
type Messages = (Vec<Req>, fn(&Replies) -> Res<u64>);

/// The message of an op on a file's open handle `f` (`data`: a write's bytes); None for other ops.
fn on_handle(request: &Request, f: Fid, data: &[u8]) -> Option<Messages> {
    Some(match request {
        Request::Read { offset, len, .. } => (vec![wire::read(&f, *offset, *len as u32)], read_bytes),
        Request::Write { offset, .. } => (vec![wire::write(&f, *offset, data)], written),
        Request::Commit { .. } => (vec![wire::flush(&f)], zero),
        // Lock the file's first byte and release it, as one compound.
        Request::Lock { .. } => (vec![wire::lock(&f, 0, 1, wire::LOCK_EXCLUSIVE | wire::LOCK_FAIL_IMMEDIATELY), wire::lock(&f, 0, 1, wire::LOCK_UNLOCK)], zero),
        Request::Handle { op: HandleOp::Getattr, .. } => (vec![wire::query_info(&f, wire::INFO_FILE, wire::FILE_NETWORK_OPEN_INFO, 0, 56)], first_info),
        Request::Handle { op: HandleOp::Setattr, .. } => {
            (vec![wire::set_info(&f, wire::FILE_BASIC_INFO, &wire::basic_info_write_time(wire::filetime_now()))], zero)
        }
        Request::Handle { op: HandleOp::Getsecurity, .. } => {
            (vec![wire::query_info(&f, wire::INFO_SECURITY, 0, wire::SECURITY_OWNER_GROUP_DACL, 4096)], first_info)
        }
        _ => return None,
    })
}

/// The middle response's output (QUERY_INFO in CREATE + QUERY_INFO + CLOSE), its length.
fn info_bytes(r: &Replies) -> Res<u64> {
    check(r, &[])?;
    wire::parse_output(&r[1]).map(|o| o.len() as u64).map_err(malformed)
}

fn with_close<const N: usize>(open: Req, middle: [Req; N]) -> Vec<Req> {
    // One allocation of the compound's final size.
    let mut v = Vec::with_capacity(N + 2);
    v.push(open);
    v.extend(middle);
    v.push(wire::close(&RELATED_FID));
    v
}

/// CREATE (open for attributes) of the path that `parts` make.
fn open_attrs(parts: &[&str]) -> Req {
    wire::create_in(parts, wire::FILE_READ_ATTRIBUTES, 0, wire::OPEN, 0)
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => {
            // Built by hand: format! costs about a thousand instructions per path op.
            let mut path = String::with_capacity(a.len() + 1 + b.len());
            path.push_str(a);
            path.push('/');
            path.push_str(b);
            path
        }
    }
}

/// The server refused who or what peakbench asked for (user, share, dialect): bad input,
/// so the engine exits 2 (main.rs) and the user sees one line.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The parts of `smb://[user[:password]@]host[:port]/share[/path]` the engine gets as fields.
fn resolve(spec: &SmbSpec) -> anyhow::Result<std::net::SocketAddr> {
    let h = spec.host.trim_start_matches('[').trim_end_matches(']');
    (h, spec.port).to_socket_addrs().map_err(|e| anyhow!("cannot resolve {}: {e}", spec.host))?.next().ok_or_else(|| anyhow!("{} has no address", spec.host))
}

impl Smb {
    pub fn url_of(spec: &SmbSpec) -> String {
        spec.url.clone().unwrap_or_else(|| format!("smb://{}:{}/{}", spec.host, spec.port, spec.share))
    }

    pub fn open(spec: &SmbSpec) -> anyhow::Result<Smb> {
        let url = Smb::url_of(spec);
        let addr = resolve(spec).map_err(|e| anyhow!("{url}: {e}"))?;
        let login = Login {
            share: spec.share.clone(),
            user: spec.user.clone(),
            password: spec.password.clone(),
            domain: spec.domain.clone(),
            dialects: crate::dialect::dialects(spec.dialect.as_deref())?,
            signing: spec.signing,
            encrypt: spec.encrypt,
            timeout: Duration::from_secs_f64(spec.timeout_ms.max(1.0) / 1000.0),
        };
        let client = Arc::new(Client::new(addr, login.clone(), spec.connections, spec.max_outstanding));
        let live = client.connect_all().map_err(|e| match e {
            SetupError::Share(s) if s == wire::STATUS_BAD_NETWORK_NAME => {
                Refused(format!("{url}: the server has no share {:?}{}", spec.share, offered(&addr, &login))).into()
            }
            e @ (SetupError::Dialect(_) | SetupError::Logon(_) | SetupError::Share(_) | SetupError::Signing(_) | SetupError::Encryption(_)) => {
                Refused(format!("{url}: {e}")).into()
            }
            e => anyhow!("{url}: {e}"),
        })?;
        let xfer = live.negotiated.max_read.min(live.negotiated.max_write).clamp(512, MAX_XFER);
        let base = spec.path.trim_matches('/').to_string();
        let smb = Smb {
            url,
            client: client.clone(),
            root: base.clone(),
            base,
            handles: Arc::new(Mutex::new(HashMap::new())),
            opening: Arc::new(Mutex::new(HashMap::new())),
            in_use: Arc::new(InUse { client: client.clone(), by_handle: Mutex::new(HashMap::new()) }),
            timeout: login.timeout,
            xfer,
            content: Default::default(),
        };
        if !smb.base.is_empty() {
            smb.stat(&smb.base).map_err(|e| anyhow!("{}: the directory {:?} in the share: {e}", smb.url, smb.base))?;
        }
        Ok(smb)
    }

    fn full(&self, path: &str) -> String {
        join(&self.root, path.trim_matches('/'))
    }

    fn call(&self, path: Option<&str>, reqs: &[Req]) -> Res<Replies> {
        let (_, live) = self.client.pick(path)?;
        self.client.call(&live, reqs)
    }

    /// CREATE + QUERY_INFO(FileStandardInformation) + CLOSE: (size, links, directory).
    fn stat(&self, full: &str) -> Res<(u64, u32, bool)> {
        let r = self.call(Some(full), &with_close(open_attrs(&[full]), [wire::query_info(&RELATED_FID, wire::INFO_FILE, wire::FILE_STANDARD_INFO, 0, 64)]))?;
        check(&r, &[])?;
        wire::parse_standard(wire::parse_output(&r[1]).map_err(malformed)?).map_err(malformed)
    }

    /// The open handle of a file for reads, writes and flushes (opened now if need be).
    fn handle(&self, live: &Live, full: &str) -> Res<Fid> {
        self.wait_opened(full);
        if let Some(f) = self.cached(live, full) {
            return Ok(f);
        }
        let r = self.client.call(live, &[open_handle(full)])?;
        check(&r, &[])?;
        let fid = wire::parse_create(&r[0]).map_err(malformed)?.fid;
        // Another sender may have opened the same file meanwhile: keep one handle, close the other.
        let kept = {
            let mut handles = self.handles.lock().expect("handles lock");
            match handles.get(full) {
                Some((g, other)) if *g == live.generation => Some(*other),
                _ => {
                    handles.insert(full.to_string(), (live.generation, fid));
                    None
                }
            }
        };
        match kept {
            Some(other) => {
                let _ = self.client.call(live, &[wire::close(&fid)]);
                Ok(other)
            }
            None => Ok(fid),
        }
    }

    /// Wait (at most the request timeout) for an `open` of this path still in flight, reading
    /// responses meanwhile: its own may be the one to come, and no other thread need read it.
    fn wait_opened(&self, full: &str) {
        let deadline = std::time::Instant::now() + self.timeout;
        while self.opening.lock().expect("opening lock").contains_key(full) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            self.client.poll(left.min(Duration::from_millis(1)));
        }
    }

    /// Send a Markov workload's `open`; `done` gets its outcome once the handle is kept. While an open of
    /// the same path is in flight, this one waits behind it and the ops started before it.
    fn open_async(&self, live: Arc<Live>, full: String, done: Opened) {
        {
            let mut waiting = self.opening.lock().expect("opening lock");
            if let Some(queue) = waiting.get_mut(&full) {
                queue.push(Waiting::Reopen(live, done));
                return;
            }
            waiting.insert(full.clone(), Vec::new());
        }
        let state = OpenState { handles: self.handles.clone(), opening: self.opening.clone(), client: self.client.clone() };
        state.send(&live, full, false, done);
    }

    /// A Markov workload's `close`: the handle its `open` made, or EBADF when there is none
    /// (the open failed, so the server never gave one).
    fn close_handle(&self, full: &str) -> Outcome {
        self.wait_opened(full);
        let Some((generation, fid)) = self.handles.lock().expect("handles lock").remove(full) else { return Err("EBADF".into()) };
        let (_, live) = self.client.pick(Some(full)).map_err(|e| e.kind())?;
        if live.generation != generation {
            return Err("EBADF".into()); // the connection it was open on is gone, and the handle with it
        }
        let (tx, rx) = std::sync::mpsc::channel();
        self.in_use.close_after((generation, fid), closing(self.client.clone(), live, fid, Box::new(move |outcome, _| drop(tx.send(outcome)))));
        self.client.flush();
        self.completed(&rx, self.timeout).unwrap_or_else(|| Err(SmbError::Timeout.kind()))
    }

    /// What an asynchronous request's completion sends on `rx`, reading responses meanwhile (no
    /// other thread need read its own); None after `within`.
    fn completed<T>(&self, rx: &std::sync::mpsc::Receiver<T>, within: Duration) -> Option<T> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match rx.try_recv() {
                Ok(r) => return Some(r),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            self.client.poll(left.min(Duration::from_millis(1)));
        }
    }

    /// Send `request` on the handle its open brings (a close also forgets it), or fail it as the
    /// open says when the open failed.
    fn deferred(&self, request: &Request, full: String, live: Arc<Live>, done: Completion) -> Deferred {
        if !self.one_message(request) {
            let transfer = self.transfer(request, live);
            return Box::new(move |fid| match fid {
                Ok(f) => transfer(f, done),
                Err(e) => done(Err(e), 0),
            });
        }
        let (request, data, client, handles, in_use) =
            (request.clone(), self.write_data(request).to_vec(), self.client.clone(), self.handles.clone(), self.in_use.clone());
        Box::new(move |fid| {
            let f = match fid {
                Ok(f) => f,
                Err(e) => return done(Err(e), 0),
            };
            if let Request::Handle { op: HandleOp::Close, .. } = &request {
                handles.lock().expect("handles lock").remove(&full);
                return in_use.close_after((live.generation, f), closing(client, live, f, done));
            }
            let (reqs, bytes) = on_handle(&request, f, &data).expect("an op on a handle (one_message)");
            client.call_async(&live, &reqs, Box::new(move |r| done(r.and_then(|r| bytes(&r)).map_err(|e| e.kind()), 0)));
        })
    }

    /// A read or write of several messages (`Transfer`), to start on its file's handle once known.
    fn transfer(&self, request: &Request, live: Arc<Live>) -> impl FnOnce(Fid, Completion) + Send + 'static {
        let (offset, len, xfer, writes) = match request {
            Request::Write { offset, len, xfer, .. } => (*offset, *len, *xfer, Some(self.content.clone())),
            Request::Read { offset, len, xfer, .. } => (*offset, *len, *xfer, None),
            _ => unreachable!("only reads and writes take several messages (one_message)"),
        };
        let (client, in_use, chunk) = (self.client.clone(), self.in_use.clone(), xfer.clamp(1, self.xfer as u64));
        move |fid, done| {
            let _using = in_use.enter((live.generation, fid));
            Transfer { client, live, fid, writes, offset, len, chunk, moved: 0, _using, done }.next()
        }
    }

    fn cached(&self, live: &Live, full: &str) -> Option<Fid> {
        match self.handles.lock().expect("handles lock").get(full) {
            Some((g, f)) if *g == live.generation => Some(*f),
            _ => None,
        }
    }

    /// Send a remove, rename or link (a compound on the path `full`) without blocking. A remove or rename
    /// (`release`) first closes the path's kept handle, if any: its CLOSE is queued after the reads and
    /// writes in progress on it, and the compound goes out when that CLOSE answers (whatever it says).
    fn after_release(&self, full: &str, release: bool, reqs: Vec<Req>, done: Completion) {
        let live = match self.client.pick(Some(full)) {
            Ok((_, live)) => live,
            Err(e) => return done(Err(e.kind()), 0),
        };
        let client = self.client.clone();
        let send = {
            let live = live.clone();
            move || client.call_async(&live, &reqs, Box::new(move |r| done(r.and_then(|r| zero(&r)).map_err(|e| e.kind()), 0)))
        };
        let kept = if release { self.handles.lock().expect("handles lock").remove(full) } else { None };
        match kept {
            Some((generation, fid)) if generation == live.generation => {
                let client = self.client.clone();
                let then_send: Completion = Box::new(move |_, _| {
                    send();
                    client.flush();
                });
                self.in_use.close_after((generation, fid), closing(self.client.clone(), live, fid, then_send));
            }
            _ => send(),
        }
    }

    /// Start an op of several round trips (`chained`) without blocking: a listing, or a remove or rename
    /// after the close of the path's kept handle.
    fn start_chained(&self, request: &Request, done: Completion) {
        match request {
            Request::Readdir { path, plus } => {
                self.list_async(&self.full(path), *plus, Box::new(move |r| done(r.map(|(bytes, _)| bytes).map_err(|e| e.kind()), 0)))
            }
            Request::Remove { path } => {
                let full = self.full(path);
                let open = wire::create(&full, wire::DELETE, 0, wire::OPEN, wire::NON_DIRECTORY_FILE | wire::DELETE_ON_CLOSE);
                self.after_release(&full, true, with_close(open, []), done);
            }
            Request::Rename { from, to } | Request::Link { from, to } => {
                let rename = matches!(request, Request::Rename { .. });
                let (f, t) = (self.full(from), self.full(to));
                let (class, access) = if rename { (wire::FILE_RENAME_INFO, wire::DELETE) } else { (wire::FILE_LINK_INFO, wire::FILE_READ_ATTRIBUTES) };
                let open = wire::create(&f, access, 0, wire::OPEN, 0);
                self.after_release(&f, rename, with_close(open, [wire::set_info(&RELATED_FID, class, &wire::rename_info(&t, false))]), done);
            }
            _ => unreachable!("not an op of several round trips (chained)"),
        }
    }

    /// How long a blocking caller waits for an op of several round trips: each message has the request
    /// timeout, so the op ends by then unless a listing has more pages; this bounds the wait regardless.
    fn chain_timeout(&self) -> Duration {
        self.timeout * 8
    }

    /// Start a directory listing (`Listing`) on the directory's connection.
    fn list_async(&self, full: &str, plus: bool, done: Listed) {
        match self.client.pick(Some(full)) {
            Ok((_, live)) => {
                let class = if plus { wire::FILE_ID_BOTH_DIR_INFO } else { wire::FILE_NAMES_INFO };
                Listing { client: self.client.clone(), live, class, bytes: 0, names: Vec::new(), done }.start(full)
            }
            Err(e) => done(Err(e)),
        }
    }

    /// The compound for an op, if it is one; `fid` is the file's kept handle, if open.
    fn plan(&self, request: &Request, fid: Option<Fid>) -> Plan {
        // Each path is encoded into its CREATE below the file set's root, with no joined copy.
        let root = self.root.as_str();
        match request {
            Request::Null => Plan::Compound(vec![wire::echo()], zero),
            Request::Getattr { path } => Plan::Compound(
                with_close(open_attrs(&[root, path]), [wire::query_info(&RELATED_FID, wire::INFO_FILE, wire::FILE_NETWORK_OPEN_INFO, 0, 56)]),
                info_bytes,
            ),
            Request::Access { path } => Plan::Compound(
                with_close(
                    wire::create_in(&[root, path], wire::READ_CONTROL | wire::FILE_READ_ATTRIBUTES, 0, wire::OPEN, 0),
                    [wire::query_info(&RELATED_FID, wire::INFO_SECURITY, 0, wire::SECURITY_OWNER_GROUP_DACL, 4096)],
                ),
                info_bytes,
            ),
            // SMB2 has no permission bits: the mode is not sent, the write time is set instead.
            Request::Setattr { path, .. } => Plan::Compound(
                with_close(
                    wire::create_in(&[root, path], wire::FILE_WRITE_ATTRIBUTES, 0, wire::OPEN, 0),
                    [wire::set_info(&RELATED_FID, wire::FILE_BASIC_INFO, &wire::basic_info_write_time(wire::filetime_now()))],
                ),
                zero,
            ),
            Request::Lookup { dir, name } => Plan::Compound(with_close(open_attrs(&[root, dir, name]), []), zero),
            Request::Create { path } => Plan::Compound(
                with_close(wire::create_in(&[root, path], wire::FILE_READ_ATTRIBUTES, wire::ATTR_NORMAL, wire::CREATE_NEW, wire::NON_DIRECTORY_FILE), []),
                zero,
            ),
            Request::Mkdir { path } => Plan::Compound(
                with_close(wire::create_in(&[root, path], wire::FILE_READ_ATTRIBUTES, wire::ATTR_DIRECTORY, wire::CREATE_NEW, wire::DIRECTORY_FILE), []),
                zero,
            ),
            Request::Rmdir { path } => {
                Plan::Compound(with_close(wire::create_in(&[root, path], wire::DELETE, 0, wire::OPEN, wire::DIRECTORY_FILE | wire::DELETE_ON_CLOSE), []), zero)
            }
            Request::Fsstat | Request::Fsinfo => {
                let class = if matches!(request, Request::Fsstat) { wire::FS_FULL_SIZE_INFO } else { wire::FS_ATTRIBUTE_INFO };
                Plan::Compound(with_close(open_attrs(&[root]), [wire::query_info(&RELATED_FID, wire::INFO_FILESYSTEM, class, 0, 1024)]), info_bytes)
            }
            _ if self.one_message(request) => match fid.and_then(|f| on_handle(request, f, self.write_data(request))) {
                Some((reqs, bytes)) => Plan::Compound(reqs, bytes),
                None => Plan::Blocking,
            },
            _ => Plan::Blocking,
        }
    }

    /// Whether an op on a handle is one message (a read or write of at most one transfer).
    fn one_message(&self, request: &Request) -> bool {
        match request {
            Request::Read { len, .. } | Request::Write { len, .. } => *len <= self.xfer as u64,
            _ => true,
        }
    }

    fn write_data(&self, request: &Request) -> &[u8] {
        match request {
            Request::Write { offset, len, .. } => self.content.at(*offset, *len as usize),
            _ => &[],
        }
    }

    /// The path whose connection (and kept handle) a request uses.
    fn path_of(request: &Request) -> Option<&str> {
        match request {
            Request::Read { path, .. } | Request::Write { path, .. } | Request::Commit { path } | Request::Lock { path } | Request::Handle { path, .. } => {
                Some(path)
            }
            _ => None,
        }
    }

    fn op(&self, request: &Request) -> Res<u64> {
        if let Request::Handle { op: HandleOp::Open, path } = request {
            let (full, (tx, rx)) = (self.full(path), std::sync::mpsc::channel());
            let (_, live) = self.client.pick(Some(&full))?;
            self.open_async(live, full, Box::new(move |r| drop(tx.send(r))));
            self.client.flush();
            return self.completed(&rx, self.timeout).unwrap_or(Err(SmbError::Timeout));
        }
        let key = Self::path_of(request).map(|p| self.full(p));
        let (_, live) = self.client.pick(key.as_deref())?;
        let fid = match &key {
            Some(k) => Some(self.handle(&live, k)?),
            None => None,
        };
        match (self.plan(request, fid), request) {
            (Plan::Compound(reqs, bytes), _) => bytes(&self.client.call(&live, &reqs)?),
            (_, Request::Read { offset, len, xfer, .. }) => {
                let f = fid.expect("a path");
                let _using = self.in_use.enter((live.generation, f));
                self.logical_read(&live, &f, *offset, *len, *xfer)
            }
            (_, Request::Write { offset, len, xfer, .. }) => {
                let f = fid.expect("a path");
                let _using = self.in_use.enter((live.generation, f));
                self.logical_write(&live, &f, *offset, *len, *xfer)
            }
            (_, r) => Err(SmbError::Malformed(format!("{r:?} has no SMB2 form"))),
        }
    }

    /// READs of at most the negotiated size, until `len` bytes or end of file.
    fn logical_read(&self, live: &Live, fid: &Fid, offset: u64, len: u64, xfer: u64) -> Res<u64> {
        let chunk = xfer.clamp(1, self.xfer as u64);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk) as u32;
            let got = read_bytes(&self.client.call(live, &[wire::read(fid, offset + done, n)])?)?;
            done += got;
            if got < n as u64 {
                break;
            }
        }
        Ok(done)
    }

    fn logical_write(&self, live: &Live, fid: &Fid, offset: u64, len: u64, xfer: u64) -> Res<u64> {
        let chunk = xfer.clamp(1, self.xfer as u64);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk) as usize;
            let w = written(&self.client.call(live, &[wire::write(fid, offset + done, self.content.at(offset + done, n))])?)?;
            if w == 0 {
                return Err(SmbError::Malformed("the server wrote nothing".into()));
            }
            done += w;
        }
        Ok(done)
    }

    /// Every name in a directory: (bytes of listing, names without . and ..), waited for.
    fn list(&self, full: &str, plus: bool) -> Res<(u64, Vec<String>)> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.list_async(full, plus, Box::new(move |r| drop(tx.send(r))));
        self.client.flush();
        self.completed(&rx, self.chain_timeout()).unwrap_or(Err(SmbError::Timeout))
    }

    fn anyhow(&self, what: &str, path: &str, e: SmbError) -> anyhow::Error {
        anyhow!("{}: {what} {path}: {e}", self.url)
    }

    /// Open (or create) a file and return its handle and size.
    fn open_file(&self, full: &str, disposition: u32) -> Res<(Arc<Live>, wire::Created)> {
        let (_, live) = self.client.pick(Some(full))?;
        let r = self.client.call(
            &live,
            &[wire::create(
                full,
                wire::FILE_READ_DATA | wire::FILE_WRITE_DATA | wire::FILE_READ_ATTRIBUTES,
                wire::ATTR_NORMAL,
                disposition,
                wire::NON_DIRECTORY_FILE,
            )],
        )?;
        check(&r, &[])?;
        Ok((live, wire::parse_create(&r[0]).map_err(malformed)?))
    }

    fn close_fid(&self, live: &Live, fid: &Fid) -> Res<()> {
        check(&self.client.call(live, &[wire::close(fid)])?, &[])
    }

    fn set_size(&self, full: &str, size: u64) -> Res<()> {
        let open = wire::create(full, wire::FILE_WRITE_DATA, 0, wire::OPEN, wire::NON_DIRECTORY_FILE);
        check(&self.call(Some(full), &with_close(open, [wire::set_info(&RELATED_FID, wire::FILE_END_OF_FILE_INFO, &wire::end_of_file_info(size))]))?, &[])
    }
}

/// The shares a server offers, for an error about one it does not (smbclient -L, if installed).
fn offered(addr: &std::net::SocketAddr, login: &Login) -> String {
    let listed = std::process::Command::new("smbclient")
        .args(["-g", "-L", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", &format!("{}%{}", login.user, login.password)])
        .args(if login.domain.is_empty() { vec![] } else { vec!["-W".to_string(), login.domain.clone()] })
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match listed {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let disks: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("Disk|")).map(|l| l.split('|').next().unwrap_or("")).collect();
            if disks.is_empty() {
                String::new()
            } else {
                format!("; it offers {}", disks.join(", "))
            }
        }
        Err(_) => String::new(),
    }
}

impl Drop for Smb {
    fn drop(&mut self) {
        self.client.shutdown();
    }
}

impl Target for Smb {
    fn supports(&self, op: Op) -> bool {
        !matches!(op, Op::Symlink | Op::Readlink | Op::Pathconf)
    }

    fn execute(&self, request: &Request) -> Outcome {
        match request {
            Request::Handle { op: HandleOp::Close, path } => self.close_handle(&self.full(path)),
            _ if chained(request) => {
                let (tx, rx) = std::sync::mpsc::channel();
                self.start_chained(request, Box::new(move |outcome, _| drop(tx.send(outcome))));
                self.client.flush();
                self.completed(&rx, self.chain_timeout()).unwrap_or_else(|| Err(SmbError::Timeout.kind()))
            }
            _ => self.op(request).map_err(|e| e.kind()),
        }
    }

    fn probe(&self, request: &Request) -> Result<Reply, String> {
        self.observe(request)
    }

    fn pipelines(&self) -> bool {
        self.client.pipelines()
    }

    fn flush(&self) {
        self.client.flush()
    }

    /// The leading sender reads the responses itself (conn.rs): no reader thread to wake per response.
    fn completes_in_poll(&self) -> bool {
        true
    }

    fn poll(&self, timeout: Duration) {
        self.client.poll(timeout)
    }

    fn send_slack(&self) -> Duration {
        self.client.send_slack()
    }

    fn result_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut fields = serde_json::Map::new();
        let stray = self.client.stray_replies.load(std::sync::atomic::Ordering::Relaxed);
        let reconnects = self.client.reconnects.load(std::sync::atomic::Ordering::Relaxed);
        let reauthentications = self.client.reauthentications.load(std::sync::atomic::Ordering::Relaxed);
        fields.insert(
            "smb".into(),
            serde_json::json!({"connections": self.client.connections(), "stray_replies": stray, "reconnects": reconnects, "reauthentications": reauthentications}),
        );
        // Latencies include what receive moderation held back: say how much.
        fields.insert("receive_moderation".into(), self.client.moderation_report());
        fields
    }

    fn start(&self, request: &Request, done: Completion) -> Result<(), Completion> {
        let key = Self::path_of(request).map(|p| self.full(p));
        let (_, live) = match self.client.pick(key.as_deref()) {
            Ok(l) => l,
            Err(e) => {
                done(Err(e.kind()), 0);
                return Ok(());
            }
        };
        if let (Some(full), false) = (&key, matches!(request, Request::Handle { op: HandleOp::Open, .. })) {
            // An op on a handle whose open is in flight goes out when the open answers, after
            // those started before it, so no later op (a close) overtakes it.
            let mut waiting = self.opening.lock().expect("opening lock");
            if let Some(deferred) = waiting.get_mut(full) {
                deferred.push(Waiting::Op(self.deferred(request, full.clone(), live, done)));
                return Ok(());
            }
            // A file's first read, write, flush or lock opens it without blocking, the op waiting on
            // the open: a blocking open held a sender thread, and the receive side while it read for its
            // reply (dozens of them at a trial's start stalled it). Checked under the lock that the
            // open's reply takes to keep the handle, so no second open goes out.
            let on_a_kept_handle = matches!(request, Request::Read { .. } | Request::Write { .. } | Request::Commit { .. } | Request::Lock { .. });
            if on_a_kept_handle && self.cached(&live, full).is_none() {
                waiting.insert(full.clone(), vec![Waiting::Op(self.deferred(request, full.clone(), live.clone(), done))]);
                drop(waiting);
                let state = OpenState { handles: self.handles.clone(), opening: self.opening.clone(), client: self.client.clone() };
                state.send(&live, full.clone(), true, Box::new(|_| {}));
                return Ok(());
            }
        }
        match (request, &key) {
            (Request::Handle { op: HandleOp::Open, .. }, Some(full)) => {
                self.open_async(live, full.clone(), Box::new(move |r| done(r.map_err(|e| e.kind()), 0)));
                return Ok(());
            }
            (Request::Handle { op: HandleOp::Close, .. }, Some(full)) => {
                let kept = self.handles.lock().expect("handles lock").remove(full);
                return match kept {
                    Some((generation, fid)) if generation == live.generation => {
                        self.in_use.close_after((generation, fid), closing(self.client.clone(), live, fid, done));
                        Ok(())
                    }
                    // Its open is still in flight or failed, or its connection is gone: the blocking
                    // way waits for the open and says EBADF when there is no handle.
                    _ => Err(done),
                };
            }
            _ => {}
        }
        let fid = key.as_deref().and_then(|k| self.cached(&live, k));
        if let (Some(f), false) = (fid, self.one_message(request)) {
            self.transfer(request, live)(f, done);
            return Ok(());
        }
        match self.plan(request, fid) {
            Plan::Compound(reqs, bytes) => {
                self.client.call_async(&live, &reqs, Box::new(move |r| done(r.and_then(|r| bytes(&r)).map_err(|e| e.kind()), 0)));
                Ok(())
            }
            Plan::Blocking if chained(request) => {
                self.start_chained(request, done);
                Ok(())
            }
            Plan::Blocking => Err(done),
        }
    }

    fn store(&self) -> Option<&dyn FileStore> {
        Some(self)
    }

    fn store_mut(&mut self) -> Option<&mut dyn FileStore> {
        Some(self)
    }
}

impl FileStore for Smb {
    fn enter_fileset(&mut self, id: &str, create: bool) -> anyhow::Result<()> {
        let dir = join(&self.base, id);
        if create {
            let open = wire::create(&dir, wire::FILE_READ_ATTRIBUTES, wire::ATTR_DIRECTORY, wire::OPEN_IF, wire::DIRECTORY_FILE);
            self.call(Some(&dir), &with_close(open, [])).and_then(|r| zero(&r)).map_err(|e| self.anyhow("CREATE (directory)", &dir, e))?;
        }
        self.stat(&dir).map_err(|e| self.anyhow("QUERY_INFO", &dir, e))?;
        self.root = dir;
        self.handles.lock().expect("handles lock").clear();
        Ok(())
    }

    fn is_empty(&self) -> anyhow::Result<bool> {
        self.list(&self.base, false).map(|(_, names)| names.is_empty()).map_err(|e| self.anyhow("QUERY_DIRECTORY", &self.base, e))
    }

    fn read_meta(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let full = join(&self.base, name);
        let (live, c) = match self.open_file(&full, wire::OPEN) {
            Ok(x) => x,
            Err(SmbError::Status(wire::STATUS_OBJECT_NAME_NOT_FOUND)) => return Ok(None),
            Err(e) => return Err(self.anyhow("CREATE", &full, e)),
        };
        let mut out = Vec::new();
        let read = loop {
            match self.client.call(&live, &[wire::read(&c.fid, out.len() as u64, self.xfer)]) {
                Ok(r) if status(&r[0]).map(|h| h.status) == Ok(wire::STATUS_END_OF_FILE) => break Ok(()),
                Ok(r) => match check(&r, &[]).and_then(|_| wire::parse_read(&r[0]).map_err(malformed)) {
                    Ok([]) => break Ok(()),
                    Ok(d) => out.extend_from_slice(d),
                    Err(e) => break Err(e),
                },
                Err(e) => break Err(e),
            }
            if out.len() as u64 >= c.size {
                break Ok(());
            }
        };
        let _ = self.close_fid(&live, &c.fid);
        read.map(|_| Some(out)).map_err(|e| self.anyhow("READ", &full, e))
    }

    fn write_meta(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        // Write beside, then rename over: the old or the new manifest, never half.
        let (tmp, full) = (join(&self.base, &format!(".{name}.tmp")), join(&self.base, name));
        let (live, c) = self.open_file(&tmp, wire::OVERWRITE_IF).map_err(|e| self.anyhow("CREATE", &tmp, e))?;
        let mut at = 0usize;
        let wrote = loop {
            if at >= bytes.len() {
                break Ok(());
            }
            let n = (bytes.len() - at).min(self.xfer as usize);
            match self.client.call(&live, &[wire::write(&c.fid, at as u64, &bytes[at..at + n])]).and_then(|r| written(&r)) {
                Ok(0) => break Err(SmbError::Malformed("the server wrote nothing".into())),
                Ok(w) => at += w as usize,
                Err(e) => break Err(e),
            }
        };
        let flushed = wrote.and_then(|_| zero(&self.client.call(&live, &[wire::flush(&c.fid)])?));
        let closed = self.close_fid(&live, &c.fid);
        flushed.and(closed).map_err(|e| self.anyhow("WRITE", &tmp, e))?;
        let open = wire::create(&tmp, wire::DELETE, 0, wire::OPEN, 0);
        let r = self.call(Some(&tmp), &with_close(open, [wire::set_info(&RELATED_FID, wire::FILE_RENAME_INFO, &wire::rename_info(&full, true))]));
        r.and_then(|r| zero(&r)).map(|_| ()).map_err(|e| self.anyhow("SET_INFO (rename)", &tmp, e))
    }

    fn ensure_dir(&self, path: &str) -> anyhow::Result<()> {
        let full = self.full(path);
        let open = wire::create(&full, wire::FILE_READ_ATTRIBUTES, wire::ATTR_DIRECTORY, wire::OPEN_IF, wire::DIRECTORY_FILE);
        self.call(Some(&full), &with_close(open, [])).and_then(|r| zero(&r)).map(|_| ()).map_err(|e| self.anyhow("CREATE (directory)", &full, e))
    }

    fn ensure_file(&self, path: &str, size: u64, _content: &[u8]) -> anyhow::Result<()> {
        let full = self.full(path);
        let (live, c) = self.open_file(&full, wire::OPEN_IF).map_err(|e| self.anyhow("CREATE", &full, e))?;
        // The content is a function of the offset (as the posix target writes it).
        let grown = if c.size < size { self.logical_write(&live, &c.fid, c.size, size - c.size, self.xfer as u64).map(|_| ()) } else { Ok(()) };
        let closed = self.close_fid(&live, &c.fid);
        grown.and(closed).map_err(|e| self.anyhow("WRITE", &full, e))?;
        if c.size > size {
            return self.truncate(path, size);
        }
        Ok(())
    }

    fn ensure_symlink(&self, path: &str, _points_to: &str) -> anyhow::Result<()> {
        bail!("{}: {path}: SMB2 makes no symbolic links; use a file set without symlinks", self.url)
    }

    fn truncate(&self, path: &str, size: u64) -> anyhow::Result<()> {
        let full = self.full(path);
        self.set_size(&full, size).map_err(|e| self.anyhow("SET_INFO (end of file)", &full, e))
    }
}

impl Smb {
    /// `Target::probe`: the commands whose replies validation checks, keeping what they return
    /// (errors name the SMB2 command); the other ops are `execute` itself.
    fn observe(&self, request: &Request) -> Result<Reply, String> {
        match request {
            Request::Read { path, offset, len, .. } => {
                let full = self.full(path);
                let (_, live) = self.client.pick(Some(&full)).map_err(|e| format!("connection: {e}"))?;
                let fid = self.handle(&live, &full).map_err(|e| format!("CREATE: {e}"))?;
                let r = self.client.call(&live, &[wire::read(&fid, *offset, (*len).min(self.xfer as u64) as u32)]).map_err(|e| e.to_string())?;
                if status(&r[0]).map(|h| h.status) == Ok(wire::STATUS_END_OF_FILE) {
                    return Ok(Reply::Data(Vec::new()));
                }
                check(&r, &[]).map_err(|e| e.to_string())?;
                wire::parse_read(&r[0]).map(|d| Reply::Data(d.to_vec())).map_err(|e| e.to_string())
            }
            Request::Getattr { path } => {
                let (size, nlink, dir) = self.stat(&self.full(path)).map_err(|e| format!("QUERY_INFO (standard): {e}"))?;
                Ok(Reply::Attr(Attr { kind: if dir { Kind::Dir } else { Kind::File }, mode: None, size, nlink }))
            }
            Request::Lookup { dir, name } => {
                self.op(request).map_err(|e| format!("CREATE (open): {e}"))?;
                self.observe(&Request::Getattr { path: join(dir, name) })
            }
            // A security descriptor is at least its 20-byte header.
            Request::Access { .. } => self.op(request).map(|n| Reply::Granted(n >= 20)).map_err(|e| format!("QUERY_INFO (security): {e}")),
            Request::Readdir { path, plus } => self.list(&self.full(path), *plus).map(|(_, n)| Reply::Names(n)).map_err(|e| format!("QUERY_DIRECTORY: {e}")),
            Request::Fsstat => {
                let (total, caller, actual) = self.query_fs(wire::FS_FULL_SIZE_INFO, "fs full size", wire::parse_fs_full_size)?;
                if caller > total || actual > total {
                    return Err(format!("QUERY_INFO (fs full size): free exceeds total ({caller}, {actual} of {total})"));
                }
                Ok(Reply::Text(format!("{actual} of {total} bytes free ({caller} available to this user)")))
            }
            Request::Fsinfo => {
                let (attributes, name_max, fs) = self.query_fs(wire::FS_ATTRIBUTE_INFO, "fs attributes", wire::parse_fs_attribute)?;
                if name_max == 0 {
                    return Err("QUERY_INFO (fs attributes): longest name 0".into());
                }
                Ok(Reply::Text(format!("{fs}, attributes {attributes:#x}, names up to {name_max}; transfers of {} bytes", self.xfer)))
            }
            _ => self.execute(request).map(Reply::Done),
        }
    }

    /// The share root's file-system information of `class`, parsed; errors name the class as `what`.
    fn query_fs<T>(&self, class: u8, what: &str, parse: impl Fn(&[u8]) -> Result<T, String>) -> Result<T, String> {
        let query = with_close(open_attrs(&[&self.root]), [wire::query_info(&RELATED_FID, wire::INFO_FILESYSTEM, class, 0, 1024)]);
        let r = self.call(None, &query).and_then(|r| check(&r, &[]).map(|_| r)).map_err(|e| format!("QUERY_INFO ({what}): {e}"))?;
        wire::parse_output(&r[1]).and_then(parse).map_err(|e| format!("QUERY_INFO ({what}): {e}"))
    }
}
