//! The posix target's cache of open read descriptors, one table per thread (like an NFS
//! client's file handles, or fio's open files): a read is one pread, not openat + pread + close.
//! Whatever changes which file a path names (remove, rename, rmdir, the untimed restore) is
//! published in an invalidation log that every thread applies before its next cached read, so
//! a read never uses a descriptor of a file its own engine has since removed or renamed away.

use super::sys::Fd;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Mutex;

/// Invalidation log entries kept; a thread further behind than this drops its whole cache.
pub const LOG_LEN: usize = 4096;
/// Cached descriptors per thread.
const CACHE_PER_THREAD: usize = 8192;
/// Files of an index below this keep their descriptor in a plain array slot of 4 bytes (at
/// most 256 KiB a thread), like the raw loop's descriptor array: a hit reads one small line
/// and hashes nothing. Higher indexes (a set of more than 65,536 files) go through the table.
const DIRECT_FILES: usize = 1 << 16;
/// An empty slot of `FdCache::by_index`.
const NO_FD: RawFd = -1;

/// What all threads share: the invalidation log and the descriptor budget.
pub struct ReadCache {
    /// Distinguishes this cache's descriptors in the threads' tables from another instance's.
    id: u64,
    /// Number of invalidations so far; `log[i % LOG_LEN]` is the path hash of invalidation i.
    epoch: AtomicU64,
    log: Mutex<Vec<u64>>,
    /// Descriptors cached by all threads, against the process's descriptor limit.
    pub cached: AtomicUsize,
    pub limit: usize,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static TABLE: RefCell<FdCache> = RefCell::new(FdCache::default());
}

impl ReadCache {
    /// A cache that may hold up to half of the descriptor limit (leaving at least 256 to everything else).
    pub fn new() -> ReadCache {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let soft = (lim.rlim_cur as usize).min(1 << 20);
        ReadCache {
            id: NEXT_ID.fetch_add(1, Relaxed),
            epoch: AtomicU64::new(0),
            log: Mutex::new(vec![0; LOG_LEN]),
            cached: AtomicUsize::new(0),
            limit: soft.saturating_sub(256) / 2,
        }
    }

    /// `path` may now name another file (or none): cached descriptors for it must go.
    pub fn invalidate(&self, path: &str) {
        let (h1, _) = path_hash(path);
        let mut log = self.log.lock().expect("invalidation log");
        let e = self.epoch.load(Relaxed);
        log[(e % LOG_LEN as u64) as usize] = h1;
        self.epoch.store(e + 1, Release);
        // Every thread's cache, this one's included, applies it before its next cached read.
    }

    /// Run `read` on this thread's cached descriptor for `key`, opening its path with `open` on a miss.
    pub fn with_fd<R>(&self, key: Key, open: impl FnOnce(&str) -> Result<Fd, String>, read: impl FnOnce(RawFd) -> Result<R, String>) -> Result<R, String> {
        enum Got {
            Cached(RawFd),
            Uncached(Fd), // the descriptor budget is spent: read, then close
        }
        let (path, (h1, h2), direct) = match key {
            Key::File(index, path) => (path, (FILE_KEY | index as u64, 0), ((index as usize) < DIRECT_FILES).then_some(index as usize)),
            Key::Path(path) => (path, path_hash(path), None),
        };
        let got = TABLE.with(|c| -> Result<Got, String> {
            let mut c = c.borrow_mut();
            if c.owner != self.id {
                // A table left by another target instance (tests): its descriptors are not ours.
                *c = FdCache::default(); // the old one's Drop closes its descriptors
                c.owner = self.id;
                c.seen = self.epoch.load(Acquire);
            }
            let epoch = self.epoch.load(Acquire);
            if epoch != c.seen {
                if epoch - c.seen > LOG_LEN as u64 {
                    c.clear(&self.cached);
                } else {
                    let log = self.log.lock().expect("invalidation log");
                    for i in c.seen..epoch {
                        c.evict_path(&self.cached, log[(i % LOG_LEN as u64) as usize]);
                    }
                }
                c.seen = epoch;
            }
            let found = match direct {
                Some(i) => c.by_index.get(i).copied().filter(|&fd| fd != NO_FD),
                None => c.find(h1, h2),
            };
            if let Some(fd) = found {
                return Ok(Got::Cached(fd));
            }
            let fd = open(path)?;
            if c.len >= CACHE_PER_THREAD || self.cached.load(Relaxed) >= self.limit {
                c.evict_one(&self.cached);
                if self.cached.load(Relaxed) >= self.limit {
                    return Ok(Got::Uncached(fd));
                }
            }
            let raw = fd.0;
            std::mem::forget(fd);
            match direct {
                Some(i) => c.insert_direct(i, raw),
                None => {
                    c.evict(&self.cached, h1); // a path sharing the first hash, if any: one entry per h1
                    c.insert(h1, h2, raw);
                }
            }
            if h1 & FILE_KEY != 0 {
                c.alias(path_hash(path).0, h1);
            }
            self.cached.fetch_add(1, Relaxed);
            Ok(Got::Cached(raw))
        })?;
        match got {
            Got::Cached(fd) => read(fd),
            Got::Uncached(fd) => read(fd.0),
        }
    }
}

/// What a cached descriptor is found by.
pub enum Key<'a> {
    /// A file of the workload's set by its index (`Request::Read::file`), and its path for the
    /// first open: a hit hashes nothing.
    File(u32, &'a str),
    /// A path alone (a replayed read, a test).
    Path(&'a str),
}

/// Marks a file-index key; a path's first hash never has this bit.
const FILE_KEY: u64 = 1 << 63;

/// Two independent 64-bit hashes of a path in one pass (FxHash-like multiply-rotate).
/// The cache identifies a path by 96 of those bits: for ten million distinct paths the
/// chance that any two collide is below 1e-15, and the table touches one cache line
/// per lookup instead of chasing a stored string.
fn path_hash(path: &str) -> (u64, u32) {
    const K1: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    const K2: u64 = 0x9e_37_79_b9_7f_4a_7c_15;
    let (mut h1, mut h2): (u64, u64) = (0, 0x2545_f491_4f6c_dd1d);
    let mut b = path.as_bytes();
    while b.len() >= 8 {
        let w = u64::from_le_bytes(b[..8].try_into().unwrap());
        h1 = (h1.rotate_left(5) ^ w).wrapping_mul(K1);
        h2 = (h2.rotate_left(23) ^ w).wrapping_mul(K2);
        b = &b[8..];
    }
    if !b.is_empty() {
        let mut tail = [0u8; 8];
        tail[..b.len()].copy_from_slice(b);
        let w = u64::from_le_bytes(tail);
        h1 = (h1.rotate_left(5) ^ w).wrapping_mul(K1);
        h2 = (h2.rotate_left(23) ^ w).wrapping_mul(K2);
    }
    h1 = (h1.rotate_left(5) ^ path.len() as u64).wrapping_mul(K1);
    h2 = (h2.rotate_left(23) ^ path.len() as u64).wrapping_mul(K2);
    // Finalise h1 (it picks the slot: its low bits must mix in every byte); 0 marks an empty slot.
    h1 ^= h1 >> 29;
    h1 = h1.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h1 ^= h1 >> 32;
    ((h1 & !FILE_KEY).max(1), (h2 >> 32) as u32)
}

#[derive(Clone, Copy, Default)]
struct Entry {
    h1: u64, // 0: empty
    h2: u32,
    fd: RawFd,
}

/// One thread's open read descriptors: those of files read by an index below DIRECT_FILES in
/// `by_index`, the others in an open-addressing table (linear probing, at most half full,
/// backward-shift deletion) of 16-byte entries.
#[derive(Default)]
struct FdCache {
    owner: u64,
    seen: u64,
    slots: Vec<Entry>,
    /// File i's descriptor at i, NO_FD if none; as long as the highest index read so far.
    by_index: Vec<RawFd>,
    /// Descriptors in `slots` and `by_index` together, and of them in `by_index`.
    len: usize,
    direct_len: usize,
    /// Where the next eviction scans of `slots` and of `by_index` start.
    hand: usize,
    direct_hand: usize,
    /// The file-index key cached under each path's first hash, so that invalidating a path
    /// finds the descriptor its file index holds.
    aliases: HashMap<u64, u64>,
}

impl FdCache {
    fn find(&self, h1: u64, h2: u32) -> Option<RawFd> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = h1 as usize & mask;
        loop {
            let e = self.slots[i];
            if e.h1 == 0 {
                return None;
            }
            if e.h1 == h1 && e.h2 == h2 {
                return Some(e.fd);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, h1: u64, h2: u32, fd: RawFd) {
        if (self.len + 1) * 2 > self.slots.len() {
            let size = (self.slots.len() * 2).max(64);
            let old = std::mem::replace(&mut self.slots, vec![Entry::default(); size]);
            self.len = 0;
            for e in old.into_iter().filter(|e| e.h1 != 0) {
                self.place(e);
            }
        }
        self.place(Entry { h1, h2, fd });
    }

    fn place(&mut self, e: Entry) {
        let mask = self.slots.len() - 1;
        let mut i = e.h1 as usize & mask;
        while self.slots[i].h1 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = e;
        self.len += 1;
    }

    /// Remove the entry in slot i, shifting later members of its probe run back.
    fn remove_at(&mut self, mut i: usize) -> RawFd {
        let mask = self.slots.len() - 1;
        let fd = self.slots[i].fd;
        self.slots[i] = Entry::default();
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let e = self.slots[j];
            if e.h1 == 0 {
                return fd;
            }
            let home = e.h1 as usize & mask;
            // e may move to i if its home is not in (i, j] (cyclically).
            let stays = if i <= j { i < home && home <= j } else { i < home || home <= j };
            if !stays {
                self.slots[i] = e;
                self.slots[j] = Entry::default();
                i = j;
            }
        }
    }

    /// Remember that the descriptor cached under `key` is the file at the path of first hash `h1`.
    fn alias(&mut self, h1: u64, key: u64) {
        if self.aliases.len() >= 2 * CACHE_PER_THREAD {
            // Aliases of descriptors evicted since: keep only the live ones.
            let direct = self.by_index.iter().enumerate().filter(|(_, &fd)| fd != NO_FD).map(|(i, _)| FILE_KEY | i as u64);
            let live: HashSet<u64> = self.slots.iter().map(|e| e.h1).filter(|k| k & FILE_KEY != 0).chain(direct).collect();
            self.aliases.retain(|_, k| live.contains(k));
        }
        self.aliases.insert(h1, key);
    }

    /// Close and forget the descriptors of the path with this first hash, whatever they are keyed by.
    fn evict_path(&mut self, cached: &AtomicUsize, h1: u64) {
        self.evict(cached, h1);
        if let Some(key) = self.aliases.remove(&h1) {
            self.evict(cached, key);
        }
    }

    fn insert_direct(&mut self, index: usize, fd: RawFd) {
        if index >= self.by_index.len() {
            self.by_index.resize(index + 1, NO_FD);
        }
        debug_assert_eq!(self.by_index[index], NO_FD, "inserted on a miss only");
        self.by_index[index] = fd;
        self.len += 1;
        self.direct_len += 1;
    }

    /// Close and forget every descriptor of a path with this first hash (or of the file of
    /// this index key).
    fn evict(&mut self, cached: &AtomicUsize, h1: u64) {
        if h1 & FILE_KEY != 0 && ((h1 & !FILE_KEY) as usize) < DIRECT_FILES {
            let i = (h1 & !FILE_KEY) as usize;
            if let Some(fd) = self.by_index.get_mut(i).filter(|fd| **fd != NO_FD) {
                unsafe { libc::close(*fd) };
                *fd = NO_FD;
                self.len -= 1;
                self.direct_len -= 1;
                cached.fetch_sub(1, Relaxed);
            }
            return;
        }
        if self.slots.is_empty() {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut i = h1 as usize & mask;
        while self.slots[i].h1 != 0 {
            if self.slots[i].h1 == h1 {
                let fd = self.remove_at(i);
                unsafe { libc::close(fd) };
                cached.fetch_sub(1, Relaxed);
                continue; // slot i now holds the next member of the run (or is empty)
            }
            i = (i + 1) & mask;
        }
    }

    /// Close some descriptor to make room (a clock hand: roughly the oldest region first).
    fn evict_one(&mut self, cached: &AtomicUsize) {
        if self.len == 0 {
            return;
        }
        if self.len == self.direct_len {
            // Every descriptor is in `by_index`.
            let n = self.by_index.len();
            while self.by_index[self.direct_hand % n] == NO_FD {
                self.direct_hand += 1;
            }
            let i = self.direct_hand % n;
            self.direct_hand += 1;
            unsafe { libc::close(self.by_index[i]) };
            self.by_index[i] = NO_FD;
            self.len -= 1;
            self.direct_len -= 1;
            cached.fetch_sub(1, Relaxed);
            return;
        }
        let mask = self.slots.len() - 1;
        while self.slots[self.hand & mask].h1 == 0 {
            self.hand += 1;
        }
        let fd = self.remove_at(self.hand & mask);
        unsafe { libc::close(fd) };
        cached.fetch_sub(1, Relaxed);
    }

    fn clear(&mut self, cached: &AtomicUsize) {
        self.aliases.clear();
        for e in self.slots.iter_mut().filter(|e| e.h1 != 0) {
            unsafe { libc::close(e.fd) };
            cached.fetch_sub(1, Relaxed);
            *e = Entry::default();
        }
        for fd in self.by_index.iter_mut().filter(|fd| **fd != NO_FD) {
            unsafe { libc::close(*fd) };
            cached.fetch_sub(1, Relaxed);
            *fd = NO_FD;
        }
        self.len = 0;
        self.direct_len = 0;
    }
}

impl Drop for FdCache {
    fn drop(&mut self) {
        let table = self.slots.iter().filter(|e| e.h1 != 0).map(|e| e.fd);
        for fd in table.chain(self.by_index.iter().copied().filter(|&fd| fd != NO_FD)) {
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_table_finds_inserts_and_evicts() {
        let cached = AtomicUsize::new(0);
        let mut c = FdCache::default();
        let mut want = std::collections::HashMap::new();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Small keys crowd a few home slots: long probe runs, wrap-around, backward shifts.
        for round in 0..20_000 {
            let h1 = next() % 300 + 1;
            if next() % 3 == 0 {
                cached.fetch_add(1, Relaxed); // evict decrements it
                let fd = unsafe { libc::dup(0) };
                c.evict(&cached, h1);
                want.remove(&h1);
                c.insert(h1, 7, fd);
                want.insert(h1, fd);
            } else if c.find(h1, 7).is_some() {
                c.evict(&cached, h1);
                want.remove(&h1);
            }
            if round % 1000 == 0 {
                for k in 1..=300u64 {
                    assert_eq!(c.find(k, 7), want.get(&k).copied(), "key {k}");
                    assert_eq!(c.find(k, 8), None);
                }
                assert_eq!(c.len, want.len());
            }
        }
        c.clear(&cached);
        assert_eq!(c.len, 0);
        let (a, b) = (path_hash("d1/d2/f3"), path_hash("d1/d2/f4"));
        assert_ne!(a, b);
        assert_eq!(a, path_hash("d1/d2/f3"));
    }
}
