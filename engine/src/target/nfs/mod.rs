//! An NFSv3 server spoken to directly over ONC-RPC/TCP: no kernel client's caching
//! or queueing stands between the load and the server. Portmapper GETPORT finds
//! MOUNT and NFS (unless their ports are given), MOUNT v3 gives the export's root
//! handle, FSINFO the transfer sizes. Calls are pipelined over one or more TCP
//! connections (rpc.rs); file handles of the object set are cached by path.

pub mod proto;
pub mod rpc;
pub mod xdr;

use super::idhash::IdHash;
use super::{Completion, FileStore, Target};
use crate::op::{Attr, Kind, Op, Outcome, Reply, Request};
use crate::spec::NfsSpec;
use anyhow::{anyhow, bail};
use proto::{CreateHow, Error, Fh, Nfs3, Res, Sattr, Stable};
use rpc::{CallOptions, Callback, Moderation, RpcClient};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// ACCESS3_READ | LOOKUP | MODIFY | EXTEND | DELETE | EXECUTE
pub const ACCESS_ALL: u32 = 0x3f;
const READDIR_COUNT: u32 = 8192;
const READDIRPLUS_MAX: u32 = 32768;

pub struct Nfs {
    pub url: String,
    pub nfs: Arc<Nfs3>,
    pub export_fh: Fh,
    root: Fh,
    cache: Arc<Mutex<HashMap<String, Fh, IdHash>>>,
    pub rsize: u32,
    pub wsize: u32,
    /// Transfers of one logical read or write in flight (at least 1).
    biod_reads: usize,
    biod_writes: usize,
    mount: Option<(RpcClient, String)>,
    content: crate::content::Writes,
}

fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// What the server does export (MOUNT EXPORT), for an error about the one asked for.
fn offered(mount: &RpcClient) -> String {
    match proto::exports(mount) {
        Ok(list) if list.is_empty() => "; the server exports nothing".into(),
        Ok(list) => format!("; the server exports {}", list.join(", ")),
        Err(e) => format!("; MOUNT EXPORT failed too: {e}"),
    }
}

fn resolve_addr(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    (h, port).to_socket_addrs().map_err(|e| anyhow!("cannot resolve {host}: {e}"))?.next().ok_or_else(|| anyhow!("{host} has no address"))
}

impl Nfs {
    pub fn url_of(spec: &NfsSpec) -> String {
        spec.url.clone().unwrap_or_else(|| format!("nfs://{}{}", spec.host, spec.export))
    }

    pub fn open(spec: &NfsSpec) -> anyhow::Result<Nfs> {
        let url = Nfs::url_of(spec);
        let opts = CallOptions {
            timeout: Duration::from_secs_f64(spec.timeout_ms.max(1.0) / 1000.0),
            retrans: spec.retrans,
            uid: spec.uid,
            gid: spec.gid,
            max_outstanding: spec.max_outstanding,
            connect_timeout: Duration::from_secs_f64((spec.timeout_ms / 1000.0).clamp(0.1, 10.0)),
            moderation: match spec.recv_wait_us {
                None => Moderation::Adaptive,
                Some(0.0) => Moderation::Off,
                Some(w) => Moderation::Fixed(Duration::from_secs_f64(w / 1e6)),
            },
        };
        let fail = |what: &str, e: &dyn std::fmt::Display| anyhow!("{url}: {what}: {e}");
        let pmap_addr = resolve_addr(&spec.host, 111).map_err(|e| anyhow!("{url}: {e}"))?;
        let port_of = |prog: u32, name: &str, given: Option<u16>| -> anyhow::Result<u16> {
            if let Some(p) = given {
                return Ok(p);
            }
            let pmap = RpcClient::new(pmap_addr, proto::PMAP_PROG, 2, 1, CallOptions { retrans: 0, ..opts.clone() });
            match proto::getport(&pmap, prog, 3) {
                Ok(0) => Err(anyhow!("{url}: portmapper GETPORT at {pmap_addr}: {name} v3 over TCP is not registered")),
                Ok(p) => Ok(p),
                Err(e) => Err(fail(&format!("portmapper GETPORT for {name} v3 at {pmap_addr}"), &e)),
            }
        };
        let mount_port = port_of(proto::MOUNT_PROG, "MOUNT", spec.mount_port)?;
        let nfs_port = port_of(proto::NFS_PROG, "NFS", spec.port)?;
        let mount_addr = SocketAddr::new(pmap_addr.ip(), mount_port);
        let mount = RpcClient::new(mount_addr, proto::MOUNT_PROG, 3, 1, opts.clone());
        let export_fh = proto::mnt(&mount, &spec.export).map_err(|e| match e {
            Error::Status(s) => anyhow!("{url}: MOUNT MNT {}: {}{}", spec.export, proto::mount_status_name(s), offered(&mount)),
            e => fail(&format!("MOUNT MNT {} at {mount_addr}", spec.export), &e),
        })?;
        let nfs_addr = SocketAddr::new(pmap_addr.ip(), nfs_port);
        let rpc = RpcClient::new(nfs_addr, proto::NFS_PROG, 3, spec.connections.max(1), opts);
        rpc.connect_all().map_err(|e| fail(&format!("NFS at {nfs_addr}"), &e))?;
        let nfs = Arc::new(Nfs3 { rpc });
        let fsinfo = nfs.fsinfo(&export_fh).map_err(|e| fail("NFS FSINFO on the export", &e))?;
        let clamp = |want: Option<u32>, max: u32, pref: u32| -> u32 {
            let max = if max == 0 { 1 << 20 } else { max.min(1 << 20) };
            want.unwrap_or(if pref > 0 { pref.max(max) } else { max }).clamp(512, max)
        };
        let rsize = clamp(spec.rsize, fsinfo.rtmax, fsinfo.rtpref);
        let wsize = clamp(spec.wsize, fsinfo.wtmax, fsinfo.wtpref);
        Ok(Nfs {
            url,
            root: export_fh.clone(),
            export_fh,
            nfs,
            cache: Arc::new(Mutex::new(HashMap::default())),
            rsize,
            wsize,
            biod_reads: spec.biod_reads.unwrap_or(1).max(1) as usize,
            biod_writes: spec.biod_writes.unwrap_or(1).max(1) as usize,
            mount: Some((mount, spec.export.clone())),
            content: Default::default(),
        })
    }

    fn cached(&self, path: &str) -> Option<Fh> {
        self.cache.lock().expect("cache lock").get(path).cloned()
    }
    fn remember(&self, path: &str, fh: Fh) {
        self.cache.lock().expect("cache lock").insert(path.to_string(), fh);
    }
    fn forget(&self, path: &str) {
        self.cache.lock().expect("cache lock").remove(path);
    }

    /// The handle of a path below the file-set root, from the cache or by LOOKUPs.
    pub fn resolve(&self, path: &str) -> Res<Fh> {
        if path.is_empty() || path == "." {
            return Ok(self.root.clone());
        }
        if let Some(f) = self.cached(path) {
            return Ok(f);
        }
        let (dir, name) = split(path);
        let d = self.resolve(dir)?;
        let (f, _) = self.nfs.lookup(&d, name)?;
        self.remember(path, f.clone());
        Ok(f)
    }

    /// Run `op` on a path's handle; a stale cached handle is looked up again once.
    fn with_fh<T>(&self, path: &str, op: impl Fn(&Fh) -> Res<T>) -> Res<T> {
        let f = self.resolve(path)?;
        match op(&f) {
            Err(Error::Status(proto::STALE)) if !path.is_empty() => {
                self.forget(path);
                op(&self.resolve(path)?)
            }
            r => r,
        }
    }

    fn parent(&self, path: &str) -> Res<(Fh, String, String)> {
        let (dir, name) = split(path);
        Ok((self.resolve(dir)?, dir.to_string(), name.to_string()))
    }

    /// A handle from a CREATE-like reply, or a LOOKUP when the server sent none.
    fn made(&self, path: &str, dir: &Fh, name: &str, got: Option<Fh>) -> Res<Fh> {
        let f = match got {
            Some(f) => f,
            None => self.nfs.lookup(dir, name)?.0,
        };
        self.remember(path, f.clone());
        Ok(f)
    }

    /// A logical read: READs of at most the negotiated size, until `len` bytes or end of file.
    pub fn logical_read(&self, fh: &Fh, offset: u64, len: u64, xfer: u64) -> Res<u64> {
        let chunk = xfer.clamp(1, self.rsize as u64);
        if self.biod_reads > 1 && len > chunk && self.nfs.rpc.pipelines() {
            return self.read_ahead(fh, offset, len, chunk);
        }
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk) as u32;
            let r = self.nfs.read(fh, offset + done, n)?;
            done += r.count as u64;
            if r.eof || r.count == 0 {
                break;
            }
        }
        Ok(done)
    }

    /// A logical write: UNSTABLE WRITEs of at most the negotiated size, then one COMMIT
    /// if any was not already stable; its time is part of the write's.
    pub fn logical_write(&self, fh: &Fh, offset: u64, len: u64, xfer: u64, stable: Stable) -> Res<u64> {
        let chunk = xfer.clamp(1, (self.wsize as u64).min(crate::content::Writes::MAX as u64));
        let mut done = 0;
        let mut need_commit = false;
        let mut verf = None;
        if self.biod_writes > 1 && len > chunk && self.nfs.rpc.pipelines() {
            let replies = self.in_flight(
                proto::WRITE,
                self.biod_writes,
                len,
                chunk,
                |at, n, e| {
                    e.opaque(fh).u64(offset + at).u32(n).u32(stable as u32).opaque(self.content.at(offset + at, n as usize));
                },
                |d, _| proto::dec_write(d).map(|w| (w, false)),
            )?;
            for (_, w) in replies {
                if w.count == 0 {
                    return Err(Error::Status(5)); // a server that accepts nothing: NFS3ERR_IO
                }
                done += w.count as u64;
                need_commit |= w.committed != Stable::FileSync as u32;
                if *verf.get_or_insert(w.verf) != w.verf {
                    return Err(Error::Rpc(rpc::RpcError::Rejected("WRITE_VERIFIER_CHANGED between the transfers of one write".into())));
                }
            }
        }
        while done < len {
            let n = (len - done).min(chunk) as usize;
            let w = self.nfs.write(fh, offset + done, self.content.at(offset + done, n), stable)?;
            if w.count == 0 {
                return Err(Error::Status(5)); // a server that accepts nothing: NFS3ERR_IO
            }
            done += w.count as u64;
            need_commit |= w.committed != Stable::FileSync as u32;
            verf.get_or_insert(w.verf);
        }
        if need_commit {
            let v = self.nfs.commit(fh, offset, len.min(u32::MAX as u64) as u32)?;
            if verf.is_some_and(|w| w != v) {
                // The server restarted between WRITE and COMMIT: the data may be lost.
                return Err(Error::Rpc(rpc::RpcError::Rejected("WRITE_VERIFIER_CHANGED server rebooted before COMMIT".into())));
            }
        }
        Ok(done)
    }

    /// Every entry of a directory, page by page.
    /// Read-ahead: the READs of one logical read, up to BIOD_MAX_READS in flight; the bytes read
    /// are those up to the first short reply or end of file.
    fn read_ahead(&self, fh: &Fh, offset: u64, len: u64, chunk: u64) -> Res<u64> {
        let replies = self.in_flight(
            proto::READ,
            self.biod_reads,
            len,
            chunk,
            |at, n, e| {
                e.opaque(fh).u64(offset + at).u32(n);
            },
            |d, n| proto::dec_read(d).map(|r| (r, r.1 || r.0 < n)),
        )?;
        let mut done = 0;
        for (at, (count, eof, _)) in replies {
            if at != done {
                break;
            }
            done += count as u64;
            if eof || (count as u64) < chunk.min(len - at) {
                break;
            }
        }
        Ok(done)
    }

    /// The transfers of one logical I/O of `len` bytes in `chunk`s, at most `window` in flight:
    /// each is sent when an earlier one's reply arrives, until a reply `decode` marks as the
    /// last (end of file). Returns every reply by its offset within the I/O, or the first error
    /// (after the transfers in flight have finished).
    fn in_flight<T: Send + 'static>(
        &self,
        proc_: u32,
        window: usize,
        len: u64,
        chunk: u64,
        args: impl Fn(u64, u32, &mut xdr::Enc),
        decode: impl Fn(&mut xdr::Dec, u32) -> Res<(T, bool)> + Send + Sync + Copy + 'static,
    ) -> Res<Vec<(u64, T)>> {
        let (tx, rx) = std::sync::mpsc::channel::<(u64, Res<(T, bool)>, u32)>();
        // Every call reports once: its reply, its timeout after the retransmissions, or a broken connection.
        let wait = self.nfs.rpc.give_up_after() + Duration::from_secs(5);
        let (mut sent, mut outstanding) = (0u64, 0usize);
        let mut replies = Vec::new();
        let (mut failed, mut ended) = (None, false);
        loop {
            while outstanding < window && sent < len && failed.is_none() && !ended {
                let (at, n) = (sent, (len - sent).min(chunk) as u32);
                let tx = tx.clone();
                self.nfs.rpc.call_async(
                    proc_,
                    |e| args(at, n, e),
                    Callback::Boxed(Box::new(move |r, retrans| {
                        let _ = tx.send((at, r.map_err(Error::Rpc).and_then(|reply| decode(&mut reply.dec(), n)), retrans));
                    })),
                );
                sent += n as u64;
                outstanding += 1;
            }
            self.nfs.rpc.flush();
            if outstanding == 0 {
                break;
            }
            // Nobody else may be reading: this thread reads until its replies are in.
            let given_up = std::time::Instant::now() + wait;
            let (at, reply, retrans) = loop {
                if let Ok(got) = rx.try_recv() {
                    break got;
                }
                let left = given_up.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(Error::Rpc(rpc::RpcError::Timeout));
                }
                self.nfs.rpc.poll(left);
            };
            rpc::add_retransmissions(retrans);
            outstanding -= 1;
            match reply {
                Ok((r, last)) => {
                    ended |= last;
                    replies.push((at, r));
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        replies.sort_by_key(|(at, _)| *at);
        Ok(replies)
    }

    pub fn list(&self, dir_path: &str, plus: bool) -> Res<(u64, Vec<proto::DirEntry>)> {
        let dir = self.resolve(dir_path)?;
        let (mut cookie, mut verf, mut bytes, mut all) = (0u64, [0u8; 8], 0u64, Vec::new());
        loop {
            let page = if plus {
                self.nfs.readdirplus(&dir, cookie, verf, READDIR_COUNT, READDIRPLUS_MAX)?
            } else {
                self.nfs.readdir(&dir, cookie, verf, READDIR_COUNT)?
            };
            bytes += page.bytes as u64;
            verf = page.verf;
            let last = page.entries.last().map(|e| e.cookie);
            all.extend(page.entries);
            match last {
                Some(c) if !page.eof => cookie = c,
                _ => return Ok((bytes, all)),
            }
            if all.len() > 10_000_000 {
                return Err(Error::Xdr(xdr::XdrError("directory listing never ends")));
            }
        }
    }

    fn op(&self, request: &Request) -> Res<u64> {
        match request {
            Request::Null => self.nfs.null().map(|_| 0),
            Request::Getattr { path } => self.with_fh(path, |f| self.nfs.getattr(f)).map(|_| 0),
            Request::Setattr { path, mode } => {
                let s = Sattr { mode: Some(*mode), ..Default::default() };
                self.with_fh(path, |f| self.nfs.setattr(f, &s)).map(|_| 0)
            }
            Request::Lookup { dir, name } => {
                let d = self.resolve(dir)?;
                let (f, _) = self.nfs.lookup(&d, name)?;
                self.remember(&join(dir, name), f);
                Ok(0)
            }
            Request::Access { path } => self.with_fh(path, |f| self.nfs.access(f, ACCESS_ALL)).map(|_| 0),
            Request::Readlink { path } => self.with_fh(path, |f| self.nfs.readlink(f)).map(|s| s.len() as u64),
            Request::Read { path, offset, len, xfer, .. } => self.with_fh(path, |f| self.logical_read(f, *offset, *len, *xfer)),
            Request::Write { path, offset, len, xfer } => self.with_fh(path, |f| self.logical_write(f, *offset, *len, *xfer, Stable::Unstable)),
            Request::Create { path } => {
                let (d, _, name) = self.parent(path)?;
                let got = self.nfs.create(&d, &name, CreateHow::Guarded, 0o644)?;
                self.made(path, &d, &name, got).map(|_| 0)
            }
            Request::Mkdir { path } => {
                let (d, _, name) = self.parent(path)?;
                let got = self.nfs.mkdir(&d, &name, 0o755)?;
                self.made(path, &d, &name, got).map(|_| 0)
            }
            Request::Symlink { path, points_to } => {
                let (d, _, name) = self.parent(path)?;
                let got = self.nfs.symlink(&d, &name, points_to)?;
                if let Some(f) = got {
                    self.remember(path, f);
                }
                Ok(0)
            }
            Request::Remove { path } => {
                let (d, _, name) = self.parent(path)?;
                let r = self.nfs.remove(&d, &name);
                self.forget(path);
                r.map(|_| 0)
            }
            Request::Rmdir { path } => {
                let (d, _, name) = self.parent(path)?;
                let r = self.nfs.rmdir(&d, &name);
                self.forget(path);
                r.map(|_| 0)
            }
            Request::Rename { from, to } => {
                let (fd, _, fname) = self.parent(from)?;
                let (td, _, tname) = self.parent(to)?;
                self.nfs.rename(&fd, &fname, &td, &tname)?;
                let moved = self.cache.lock().expect("cache lock").remove(from.as_str());
                match moved {
                    Some(f) => self.remember(to, f),
                    None => self.forget(to),
                }
                Ok(0)
            }
            Request::Link { from, to } => {
                let f = self.resolve(from)?;
                let (td, _, tname) = self.parent(to)?;
                self.nfs.link(&f, &td, &tname)?;
                self.remember(to, f);
                Ok(0)
            }
            Request::Readdir { path, plus } => {
                let (bytes, entries) = self.list(path, *plus)?;
                if *plus {
                    let mut cache = self.cache.lock().expect("cache lock");
                    for e in entries {
                        if let (Some(f), false) = (e.fh, e.name == "." || e.name == "..") {
                            cache.insert(join(path, &e.name), f);
                        }
                    }
                }
                Ok(bytes)
            }
            Request::Fsstat => self.nfs.fsstat(&self.root).map(|_| 0),
            Request::Fsinfo => self.nfs.fsinfo(&self.root).map(|_| 0),
            Request::Pathconf => self.nfs.pathconf(&self.root).map(|_| 0),
            Request::Commit { path } => self.with_fh(path, |f| self.nfs.commit(f, 0, 0)).map(|_| 0),
            Request::Lock { .. } => Err(Error::Rpc(rpc::RpcError::Rejected("PROC_UNAVAIL NFSv3 has no lock procedure (NLM)".into()))),
            Request::Handle { .. } => Err(Error::Rpc(rpc::RpcError::Rejected("PROC_UNAVAIL NFSv3 is stateless: no open or close".into()))),
        }
    }

    /// Cache the handles of everything below a directory (READDIRPLUS, recursively).
    fn warm(&self, dir: &str, depth: u32) -> Res<()> {
        if depth > 64 {
            return Ok(());
        }
        let (_, entries) = self.list(dir, true)?;
        let mut subdirs = Vec::new();
        {
            let mut cache = self.cache.lock().expect("cache lock");
            for e in entries {
                if e.name == "." || e.name == ".." {
                    continue;
                }
                let path = join(dir, &e.name);
                if e.attr.as_ref().is_some_and(|a| a.ftype == proto::NF3DIR) {
                    subdirs.push(path.clone());
                }
                if let Some(f) = e.fh {
                    cache.insert(path, f);
                }
            }
        }
        for d in subdirs {
            self.warm(&d, depth + 1)?;
        }
        Ok(())
    }

    fn anyhow(&self, what: &str, path: &str, e: Error) -> anyhow::Error {
        anyhow!("{}: {what} {path}: {e}", self.url)
    }

    fn lookup_in(&self, dir: &Fh, name: &str) -> Res<Option<Fh>> {
        match self.nfs.lookup(dir, name) {
            Ok((f, _)) => Ok(Some(f)),
            Err(Error::Status(proto::NOENT)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read a whole small file below the export's root.
    fn read_all(&self, f: &Fh) -> Res<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let r = self.nfs.read(f, out.len() as u64, self.rsize)?;
            out.extend_from_slice(r.data());
            if r.eof || r.count == 0 {
                return Ok(out);
            }
        }
    }
}

impl Drop for Nfs {
    fn drop(&mut self) {
        if let Some((mount, export)) = self.mount.take() {
            let _ = proto::umnt(&mount, &export);
        }
    }
}

impl Target for Nfs {
    fn supports(&self, op: Op) -> bool {
        // NFSv3 locks through NLM, which this target does not speak, and has no handles to open.
        op != Op::Lock && !op.explicit_handle()
    }

    fn execute(&self, request: &Request) -> Outcome {
        self.op(request).map_err(|e| e.kind())
    }

    fn probe(&self, request: &Request) -> Result<Reply, String> {
        self.observe(request)
    }

    fn take_retransmissions(&self) -> u32 {
        rpc::take_retransmissions()
    }

    fn result_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut fields = serde_json::Map::new();
        fields.insert("receive_moderation".into(), self.nfs.rpc.moderation_report());
        fields
    }

    fn pipelines(&self) -> bool {
        self.nfs.rpc.pipelines()
    }

    fn flush(&self) {
        self.nfs.rpc.flush()
    }

    /// The leading sender reads the replies itself (rpc.rs): no reader thread to wake per reply.
    fn completes_in_poll(&self) -> bool {
        true
    }

    fn poll(&self, timeout: Duration) {
        self.nfs.rpc.poll(timeout)
    }

    fn start(&self, request: &Request, done: Completion) -> Result<(), Completion> {
        use proto::*;
        use xdr::Dec;
        // Single-RPC requests whose handles are cached go out without waiting; the
        // rest (LOOKUP chains, multi-transfer I/O, namespace changes) block a sender.
        let fh_of = |path: &str| if path.is_empty() { Some(self.root.clone()) } else { self.cached(path) };
        fn outcome<T>(r: Result<rpc::Reply<&[u8]>, rpc::RpcError>, dec: impl FnOnce(&mut Dec) -> Res<T>, bytes: impl FnOnce(T) -> u64) -> Outcome {
            match r {
                Ok(reply) => dec(&mut reply.dec()).map(bytes).map_err(|e| e.kind()),
                Err(e) => Err(Error::Rpc(e).kind()),
            }
        }
        let rpc = &self.nfs.rpc;
        match request {
            Request::Null => rpc.call_async(0, |_| {}, Callback::Outcome(|r| outcome(r, |_| Ok(()), |_| 0), done)),
            Request::Getattr { path } => {
                let Some(f) = fh_of(path) else { return Err(done) };
                rpc.call_async(
                    1,
                    |e| {
                        e.opaque(&f);
                    },
                    Callback::Outcome(|r| outcome(r, dec_getattr, |_| 0), done),
                )
            }
            Request::Access { path } => {
                let Some(f) = fh_of(path) else { return Err(done) };
                rpc.call_async(
                    4,
                    |e| {
                        e.opaque(&f).u32(ACCESS_ALL);
                    },
                    Callback::Outcome(|r| outcome(r, dec_access, |_| 0), done),
                )
            }
            Request::Readlink { path } => {
                let Some(f) = fh_of(path) else { return Err(done) };
                rpc.call_async(
                    5,
                    |e| {
                        e.opaque(&f);
                    },
                    Callback::Outcome(|r| outcome(r, dec_readlink, |s| s.len() as u64), done),
                )
            }
            Request::Lookup { dir, name } => {
                let Some(d) = fh_of(dir) else { return Err(done) };
                let (cache, key) = (self.cache.clone(), join(dir, name));
                rpc.call_async(
                    3,
                    |e| {
                        e.opaque(&d).str(name);
                    },
                    // The handle goes into the cache: more to carry than a decoder.
                    Callback::Boxed(Box::new(move |r, n| {
                        let remember = |d: &mut Dec| {
                            let (f, _) = dec_lookup(d)?;
                            cache.lock().expect("cache lock").insert(key, f);
                            Ok(())
                        };
                        done(outcome(r, remember, |_| 0), n)
                    })),
                )
            }
            Request::Read { path, offset, len, xfer, .. } if *len <= (*xfer).min(self.rsize as u64) => {
                let Some(f) = fh_of(path) else { return Err(done) };
                rpc.call_async(
                    6,
                    |e| {
                        e.opaque(&f).u64(*offset).u32(*len as u32);
                    },
                    Callback::Outcome(|r| outcome(r, dec_read, |(c, _, _)| c as u64), done),
                )
            }
            Request::Fsstat | Request::Fsinfo | Request::Pathconf => {
                let p = match request {
                    Request::Fsstat => 18,
                    Request::Fsinfo => 19,
                    _ => 20,
                };
                let root = self.root.clone();
                rpc.call_async(
                    p,
                    |e| {
                        e.opaque(&root);
                    },
                    match p {
                        18 => Callback::Outcome(|r| outcome(r, dec_fsstat, |_| 0), done),
                        19 => Callback::Outcome(|r| outcome(r, dec_fsinfo, |_| 0), done),
                        _ => Callback::Outcome(|r| outcome(r, dec_pathconf, |_| 0), done),
                    },
                )
            }
            _ => return Err(done),
        }
        Ok(())
    }

    fn store(&self) -> Option<&dyn FileStore> {
        Some(self)
    }

    fn store_mut(&mut self) -> Option<&mut dyn FileStore> {
        Some(self)
    }
}

impl FileStore for Nfs {
    fn enter_fileset(&mut self, id: &str, create: bool) -> anyhow::Result<()> {
        if create {
            match self.nfs.mkdir(&self.export_fh, id, 0o755) {
                Ok(_) | Err(Error::Status(proto::EXIST)) => {}
                Err(e) => return Err(self.anyhow("MKDIR", id, e)),
            }
        }
        let (f, _) = self.nfs.lookup(&self.export_fh, id).map_err(|e| self.anyhow("LOOKUP", id, e))?;
        self.root = f;
        self.cache.lock().expect("cache lock").clear();
        if !create {
            // Before a trial: every handle of the object set, by READDIRPLUS, untimed.
            // Only a head start: whatever it misses is looked up when first used.
            let _ = self.warm("", 0);
        }
        Ok(())
    }

    fn is_empty(&self) -> anyhow::Result<bool> {
        let page = self.nfs.readdir(&self.export_fh, 0, [0; 8], READDIR_COUNT).map_err(|e| self.anyhow("READDIR", "/", e))?;
        Ok(page.entries.iter().all(|e| e.name == "." || e.name == ".."))
    }

    fn read_meta(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let Some(f) = self.lookup_in(&self.export_fh, name).map_err(|e| self.anyhow("LOOKUP", name, e))? else {
            return Ok(None);
        };
        self.read_all(&f).map(Some).map_err(|e| self.anyhow("READ", name, e))
    }

    fn write_meta(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        // Write beside with FILE_SYNC, then RENAME over: the old or the new manifest, never half.
        let tmp = format!(".{name}.tmp");
        let e = |what: &str, err: Error| self.anyhow(what, &tmp, err);
        let got = self.nfs.create(&self.export_fh, &tmp, CreateHow::Unchecked, 0o644).map_err(|x| e("CREATE", x))?;
        let f = match got {
            Some(f) => f,
            None => self.nfs.lookup(&self.export_fh, &tmp).map_err(|x| e("LOOKUP", x))?.0,
        };
        self.nfs.setattr(&f, &Sattr { size: Some(0), ..Default::default() }).map_err(|x| e("SETATTR", x))?;
        let mut at = 0usize;
        while at < bytes.len() {
            let n = (bytes.len() - at).min(self.wsize as usize);
            let w = self.nfs.write(&f, at as u64, &bytes[at..at + n], Stable::FileSync).map_err(|x| e("WRITE", x))?;
            if w.count == 0 {
                bail!("{}: WRITE {tmp}: the server wrote nothing", self.url);
            }
            at += w.count as usize;
        }
        self.nfs.rename(&self.export_fh, &tmp, &self.export_fh, name).map_err(|x| e("RENAME", x))
    }

    fn ensure_dir(&self, path: &str) -> anyhow::Result<()> {
        let (d, _, name) = self.parent(path).map_err(|e| self.anyhow("LOOKUP", path, e))?;
        match self.nfs.mkdir(&d, &name, 0o755) {
            Ok(got) => {
                self.made(path, &d, &name, got).map_err(|e| self.anyhow("LOOKUP", path, e))?;
                Ok(())
            }
            Err(Error::Status(proto::EXIST)) => Ok(()),
            Err(e) => Err(self.anyhow("MKDIR", path, e)),
        }
    }

    fn ensure_file(&self, path: &str, size: u64, _content: &[u8]) -> anyhow::Result<()> {
        let (d, _, name) = self.parent(path).map_err(|e| self.anyhow("LOOKUP", path, e))?;
        let got = self.nfs.create(&d, &name, CreateHow::Unchecked, 0o644).map_err(|e| self.anyhow("CREATE", path, e))?;
        let f = self.made(path, &d, &name, got).map_err(|e| self.anyhow("LOOKUP", path, e))?;
        let have = self.nfs.getattr(&f).map_err(|e| self.anyhow("GETATTR", path, e))?.size;
        if have == size {
            return Ok(());
        }
        if have > size {
            return self.truncate(path, size);
        }
        // The content is a function of the offset (as the posix target writes it).
        self.logical_write(&f, have, size - have, self.wsize as u64, Stable::Unstable).map_err(|e| self.anyhow("WRITE", path, e))?;
        Ok(())
    }

    fn ensure_symlink(&self, path: &str, points_to: &str) -> anyhow::Result<()> {
        let (d, _, name) = self.parent(path).map_err(|e| self.anyhow("LOOKUP", path, e))?;
        match self.nfs.symlink(&d, &name, points_to) {
            Ok(_) | Err(Error::Status(proto::EXIST)) => Ok(()),
            Err(e) => Err(self.anyhow("SYMLINK", path, e)),
        }
    }

    fn truncate(&self, path: &str, size: u64) -> anyhow::Result<()> {
        let s = Sattr { size: Some(size), ..Default::default() };
        self.with_fh(path, |f| self.nfs.setattr(f, &s)).map(|_| ()).map_err(|e| self.anyhow("SETATTR", path, e))
    }
}

fn kind_of(ftype: u32) -> Kind {
    match ftype {
        proto::NF3REG => Kind::File,
        proto::NF3DIR => Kind::Dir,
        proto::NF3LNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

fn attr_of(a: &proto::Fattr) -> Attr {
    Attr { kind: kind_of(a.ftype), mode: Some(a.mode), size: a.size, nlink: a.nlink }
}

impl Nfs {
    /// `Target::probe`: the procedures whose replies validation checks, keeping what they return
    /// (errors name the procedure); the other ops are `execute` itself.
    fn observe(&self, request: &Request) -> Result<Reply, String> {
        let fh = |path: &str| self.resolve(path).map_err(|e| format!("LOOKUP: {e}"));
        match request {
            Request::Read { path, offset, len, .. } => {
                let r = self.nfs.read(&fh(path)?, *offset, (*len).min(self.rsize as u64) as u32).map_err(|e| e.to_string())?;
                Ok(Reply::Data(r.data().to_vec()))
            }
            Request::Getattr { path } => self.nfs.getattr(&fh(path)?).map(|a| Reply::Attr(attr_of(&a))).map_err(|e| e.to_string()),
            Request::Lookup { dir, name } => {
                let (f, a) = self.nfs.lookup(&fh(dir)?, name).map_err(|e| format!("LOOKUP: {e}"))?;
                match a {
                    Some(a) => Ok(Reply::Attr(attr_of(&a))),
                    None => self.nfs.getattr(&f).map(|a| Reply::Attr(attr_of(&a))).map_err(|e| format!("GETATTR: {e}")),
                }
            }
            Request::Access { path } => {
                let granted = self.nfs.access(&fh(path)?, ACCESS_ALL).map_err(|e| e.to_string())?;
                Ok(Reply::Granted(granted & 0x5 == 0x5)) // READ and MODIFY
            }
            Request::Readlink { path } => self.nfs.readlink(&fh(path)?).map(Reply::Text).map_err(|e| e.to_string()),
            Request::Readdir { path, plus } => {
                let (_, entries) = self.list(path, *plus).map_err(|e| e.to_string())?;
                let entries: Vec<_> = entries.into_iter().filter(|e| e.name != "." && e.name != "..").collect();
                if let Some(e) = entries.iter().find(|e| *plus && (e.fh.is_none() || e.attr.is_none())) {
                    return Err(format!("no handle or attributes for {:?}", e.name));
                }
                Ok(Reply::Names(entries.into_iter().map(|e| e.name).collect()))
            }
            Request::Fsstat => {
                let s = self.nfs.fsstat(&self.root).map_err(|e| e.to_string())?;
                if s.fbytes > s.tbytes || s.abytes > s.tbytes || s.ffiles > s.tfiles {
                    return Err(format!("free exceeds total ({s:?})"));
                }
                Ok(Reply::Text(format!(
                    "{} of {} bytes free ({} available), {} of {} files free ({} available)",
                    s.fbytes, s.tbytes, s.abytes, s.ffiles, s.tfiles, s.afiles
                )))
            }
            Request::Fsinfo => {
                let i = self.nfs.fsinfo(&self.root).map_err(|e| e.to_string())?;
                if i.rtmax == 0 || i.wtmax == 0 || i.rtpref > i.rtmax || i.wtpref > i.wtmax {
                    return Err(format!("inconsistent transfer sizes ({i:?})"));
                }
                Ok(Reply::Text(format!(
                    "rtmax {} rtpref {} wtmax {} wtpref {} dtpref {}, max file {} bytes, properties {:#x}; using rsize {} wsize {}",
                    i.rtmax, i.rtpref, i.wtmax, i.wtpref, i.dtpref, i.maxfilesize, i.properties, self.rsize, self.wsize
                )))
            }
            Request::Pathconf => {
                let c = self.nfs.pathconf(&self.root).map_err(|e| e.to_string())?;
                if c.name_max == 0 {
                    return Err("name_max is 0".into());
                }
                Ok(Reply::Text(format!("name_max {}, linkmax {}, no_trunc {}, case_preserving {}", c.name_max, c.linkmax, c.no_trunc, c.case_preserving)))
            }
            _ => self.execute(request).map(Reply::Done),
        }
    }
}
