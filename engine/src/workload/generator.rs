//! Turns the workload into a deterministic stream of requests: choose an op
//! from the mix, a target object by popularity, sizes and offsets by the I/O
//! pattern, and apply the op's effect on the object set at once, so the
//! sequence depends only on the spec and seed, never on timing.

use super::fileset::{FileSet, Origin};
use super::markov::Chain;
use super::mix::Mix;
use crate::op::{HandleOp, IndexedFile, Op, Request, WHOLE};
use crate::spec::{IoSpec, Pattern, TrialSpec};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A sequential run: the file being walked and where the next transfer starts.
#[derive(Default)]
struct Cursor {
    file: Option<u32>,
    offset: u64,
}

/// Directory paths kept formatted, at most (about 40 MB): a set with more directories formats the
/// rest per request.
const MAX_CACHED_DIR_PATHS: usize = 1 << 20;

/// Files whose read path is kept formatted (`indexed_reads`), at most (a few MB): reads of files
/// beyond format their path per request. Eight times a thread's descriptor cache, which a larger
/// set misses often anyway, and a one-million-file set stays within its memory budget.
const MAX_SHARED_READ_PATHS: usize = 1 << 16;

pub struct Generator {
    pub set: FileSet,
    mix: Mix,
    rng: Pcg64Mcg,
    read: IoSpec,
    write: IoSpec,
    /// Transfer sizes of constant read and write sizes (the usual case), so a request samples no
    /// distribution; a constant draws no random number, so the sequence is the same either way.
    fixed_xfer: [Option<u64>; 2],
    read_cursor: Cursor,
    write_cursor: Cursor,
    last_written: Option<u32>,
    /// Sizes of prepared files before the trial changed them, to restore afterwards.
    pub original_sizes: HashMap<u32, u64>,
    /// Hard links made during the trial (they are not objects of the set).
    pub links: Vec<String>,
    links_made: u64,
    /// Format paths into requests. Off for targets that never look at them (null):
    /// the op sequence and the set's changes are the same either way.
    pub paths: bool,
    /// Path buffers of executed requests, reused for new ones (no malloc and free per request).
    spare: Vec<String>,
    /// Each directory's path, formatted once: a file's path is then one copy and its name. A
    /// directory's path never changes (none is renamed, and a removed one's index is not reused).
    dir_paths: Vec<Option<Box<str>>>,
    /// Name reads by file index, with a path formatted once per file (`Request::Read::file`), for
    /// a target that keys its descriptors by index: a read then formats and hashes no path.
    pub indexed_reads: bool,
    /// Each file's shared read path, once read (`indexed_reads`); a rename or remove drops it.
    read_paths: Vec<Option<Arc<str>>>,
    /// Directories this trial made and has not removed, the oldest first: the ones rmdir may
    /// remove. The oldest, so that its mkdir has long completed even when requests overlap.
    made_dirs: VecDeque<u32>,
    /// A Markov workload's chain, which chooses the ops instead of `mix`.
    chain: Option<Chain>,
}

impl Generator {
    pub fn new(spec: &TrialSpec, set: FileSet) -> Generator {
        Generator {
            set,
            mix: Mix::new(&spec.mix),
            rng: Pcg64Mcg::seed_from_u64(spec.seed ^ 0x6f70_7321),
            read: spec.read.clone(),
            write: spec.write.clone(),
            fixed_xfer: [&spec.read, &spec.write].map(|io| io.size.fixed().map(transfer_size)),
            read_cursor: Cursor::default(),
            write_cursor: Cursor::default(),
            last_written: None,
            original_sizes: HashMap::new(),
            links: Vec::new(),
            links_made: 0,
            paths: true,
            spare: Vec::new(),
            dir_paths: Vec::new(),
            indexed_reads: false,
            read_paths: Vec::new(),
            made_dirs: VecDeque::new(),
            chain: spec.markov.as_ref().map(Chain::new),
        }
    }

    /// The next request; `object` is the index of the chosen object (for traces).
    /// An op the object set cannot serve (rmdir before any mkdir, a file op once every file
    /// is removed) is drawn again among the ones it can, so every error is the server's.
    /// Only a mix none of whose ops is possible any more issues a request that fails.
    #[inline(always)] // into the claim: the request is built where the sender takes it
    pub fn next(&mut self) -> (Op, Request, Option<u32>) {
        if let Some(mut chain) = self.chain.take() {
            let next = self.next_of_chain(&mut chain);
            self.chain = Some(chain);
            return next;
        }
        let mut op = self.mix.pick(&mut self.rng);
        if !self.possible(op) {
            let (files, symlinks, dirs) = (self.set.file_pick.total(), self.set.symlink_pick.total(), self.made_dirs.len());
            op = self.mix.pick_among(&mut self.rng, |o| Self::possible_with(o, files, symlinks, dirs)).unwrap_or(op);
        }
        let (request, object) = self.request_for(op);
        (op, request, object)
    }

    /// The chain's next op: `open` takes a file not yet open, `close` the oldest open handle,
    /// and an op on a handle one of the open handles; the rest are drawn as from a mix.
    fn next_of_chain(&mut self, chain: &mut Chain) -> (Op, Request, Option<u32>) {
        let op = chain.step(&mut self.rng);
        let (f, handle_op) = match op {
            Op::Open => {
                let f = chain.unopened(&self.set, &mut self.rng);
                chain.open.push_back(f);
                (f, HandleOp::Open)
            }
            Op::Close => (chain.open.pop_front().expect("a state with a handle (spec.rs)"), HandleOp::Close),
            Op::Fgetattr => (chain.any_open(&mut self.rng), HandleOp::Getattr),
            Op::Fsetattr => (chain.any_open(&mut self.rng), HandleOp::Setattr),
            Op::Getsecurity => (chain.any_open(&mut self.rng), HandleOp::Getsecurity),
            Op::Read | Op::Write => {
                let f = chain.any_open(&mut self.rng);
                return (op, self.transfer(op == Op::Write, f), Some(f));
            }
            Op::Commit | Op::Lock => {
                let f = chain.any_open(&mut self.rng);
                let path = self.file_path(f);
                return (op, if op == Op::Commit { Request::Commit { path } } else { Request::Lock { path } }, Some(f));
            }
            _ => {
                let (request, object) = self.request_for(op);
                return (op, request, object);
            }
        };
        (op, Request::Handle { op: handle_op, path: self.file_path(f) }, Some(f))
    }

    fn possible(&self, op: Op) -> bool {
        Self::possible_with(op, self.set.file_pick.total(), self.set.symlink_pick.total(), self.made_dirs.len())
    }

    /// Whether the set holds an object `op` acts on, given the pick weights of files and
    /// symlinks and the number of directories this trial made.
    fn possible_with(op: Op, files: u64, symlinks: u64, made_dirs: usize) -> bool {
        match op {
            Op::Rmdir => made_dirs > 0,
            Op::Readlink => symlinks > 0,
            _ if op.needs_file() => files > 0,
            _ => true,
        }
    }

    fn pick_file(&mut self) -> Option<u32> {
        self.set.file_pick.pick(&mut self.rng).map(|i| i as u32)
    }

    fn pick_dir(&mut self) -> u32 {
        self.set.dir_pick.pick(&mut self.rng).unwrap_or(0) as u32
    }

    fn file_path(&mut self, f: u32) -> String {
        if !self.paths {
            return String::new();
        }
        let mut p = self.spare.pop().unwrap_or_else(|| String::with_capacity(48));
        p.clear();
        let parent = self.set.files[f as usize].parent as usize;
        if parent >= MAX_CACHED_DIR_PATHS {
            self.set.write_file_path(f, &mut p);
            return p;
        }
        if parent >= self.dir_paths.len() {
            self.dir_paths.resize(self.set.dirs.len().min(MAX_CACHED_DIR_PATHS), None);
        }
        let set = &self.set;
        let dir = self.dir_paths[parent].get_or_insert_with(|| {
            let mut d = String::new();
            set.dir_path(parent as u32, &mut d);
            d.into_boxed_str()
        });
        if !dir.is_empty() {
            p.push_str(dir);
            p.push('/');
        }
        set.push_file_name(f, &mut p);
        p
    }

    /// Take back the path buffers of an executed request.
    pub fn recycle(&mut self, request: Request) {
        if self.spare.len() >= 64 {
            return;
        }
        match request {
            Request::Getattr { path }
            | Request::Setattr { path, .. }
            | Request::Access { path }
            | Request::Read { path, .. }
            | Request::Write { path, .. }
            | Request::Commit { path }
            | Request::Create { path }
            | Request::Remove { path }
            | Request::Handle { path, .. }
                if path.capacity() > 0 =>
            {
                self.spare.push(path)
            }
            _ => {}
        }
    }

    fn dir_path(&self, d: u32) -> String {
        let mut path = String::new();
        if self.paths {
            self.set.dir_path(d, &mut path);
        }
        path
    }

    /// When no object of the needed kind exists, the op still happens and fails visibly.
    fn missing(kind: &str) -> Request {
        Request::Getattr { path: format!("(no {kind} left)") }
    }

    #[inline(always)] // one function with `next`: the request is built in place, not moved out of calls
    fn request_for(&mut self, op: Op) -> (Request, Option<u32>) {
        match op {
            Op::Null => (Request::Null, None),
            Op::Fsstat => (Request::Fsstat, None),
            Op::Fsinfo => (Request::Fsinfo, None),
            Op::Pathconf => (Request::Pathconf, None),
            Op::Readdir | Op::Readdirplus => {
                let d = self.pick_dir();
                (Request::Readdir { path: self.dir_path(d), plus: op == Op::Readdirplus }, Some(d))
            }
            Op::Readlink => match self.set.symlink_pick.pick(&mut self.rng) {
                Some(s) => {
                    let path = if self.paths { self.set.symlink_path(s as u32) } else { String::new() };
                    (Request::Readlink { path }, Some(s as u32))
                }
                None => (Self::missing("symlink"), None),
            },
            Op::Create => {
                let parent = self.pick_dir();
                let f = self.set.add_file(parent);
                (Request::Create { path: self.file_path(f) }, Some(f))
            }
            Op::Mkdir => {
                let parent = self.pick_dir();
                let d = self.set.add_dir(parent);
                self.made_dirs.push_back(d);
                (Request::Mkdir { path: self.dir_path(d) }, Some(d))
            }
            Op::Rmdir => {
                // Only directories this trial made are removed: they are known to be empty.
                match self.made_dirs.pop_front() {
                    Some(d) => {
                        self.set.dirs[d as usize].alive = false;
                        (Request::Rmdir { path: self.dir_path(d) }, Some(d))
                    }
                    None => (Request::Rmdir { path: "(no directory made by this trial)".into() }, None),
                }
            }
            _ => match self.pick_file() {
                Some(f) => (self.file_request(op, f), Some(f)),
                None => (Self::missing("file"), None),
            },
        }
    }

    #[inline(always)]
    fn file_request(&mut self, op: Op, f: u32) -> Request {
        // The picked file's own path, for the ops that name it (read and write place their own:
        // a sequential run may continue another file; commit names the last file written).
        let named = matches!(op, Op::Getattr | Op::Setattr | Op::Access | Op::Remove | Op::Rename | Op::Link | Op::Lock);
        let path = if named { self.file_path(f) } else { String::new() };
        match op {
            Op::Getattr => Request::Getattr { path },
            Op::Setattr => Request::Setattr { path, mode: 0o644 },
            Op::Access => Request::Access { path },
            Op::Lock => Request::Lock { path },
            Op::Lookup => {
                let dir = self.dir_path(self.set.files[f as usize].parent);
                let name = if self.paths { self.set.file_name(f) } else { String::new() };
                Request::Lookup { dir, name }
            }
            Op::Read => self.transfer(false, f),
            Op::Write => self.transfer(true, f),
            Op::Commit => {
                let target = self.last_written.filter(|&w| self.set.files[w as usize].alive).unwrap_or(f);
                Request::Commit { path: self.file_path(target) }
            }
            Op::Remove => {
                self.forget_read_path(f);
                self.set.remove_file(f);
                Request::Remove { path }
            }
            Op::Rename => {
                self.forget_read_path(f);
                let file = &mut self.set.files[f as usize];
                file.generation = file.generation.wrapping_add(1).max(1);
                Request::Rename { from: path, to: self.file_path(f) }
            }
            Op::Link => {
                self.links_made += 1;
                if !self.paths {
                    return Request::Link { from: path, to: String::new() };
                }
                let mut to = self.dir_path(self.set.files[f as usize].parent);
                if !to.is_empty() {
                    to.push('/');
                }
                to.push('h');
                to.push_str(&self.links_made.to_string());
                self.links.push(to.clone());
                Request::Link { from: path, to }
            }
            Op::Symlink => {
                let parent = self.pick_dir();
                let s = self.set.add_symlink(parent);
                if !self.paths {
                    return Request::Symlink { path: String::new(), points_to: String::new() };
                }
                Request::Symlink { path: self.set.symlink_path(s), points_to: self.set.symlink_target(parent, f) }
            }
            _ => unreachable!("{op:?} is not a file op"),
        }
    }

    /// A logical read or write, placed by the access pattern.
    #[inline(always)]
    fn transfer(&mut self, write: bool, picked: u32) -> Request {
        let io = if write { &self.write } else { &self.read };
        let xfer = match self.fixed_xfer[write as usize] {
            Some(xfer) => xfer,
            None => transfer_size(io.size.sample(&mut self.rng)),
        };
        let pattern = io.pattern;
        let (file, offset, len) = match pattern {
            Pattern::Random => {
                // Offsets are multiples of the transfer size's largest power of two up to 4 KiB
                // (fio aligns to the block size): a 4 KiB read touches one page, not two.
                let size = self.set.files[picked as usize].size;
                let len = if write { xfer } else { xfer.min(size) };
                let align = 1u64 << xfer.min(4096).ilog2();
                let offset = if size > len { self.rng.random_range(0..=(size - len) / align) * align } else { 0 };
                (picked, offset, len)
            }
            Pattern::Append => (picked, self.set.files[picked as usize].size, xfer),
            Pattern::WholeFile => {
                let size = self.set.files[picked as usize].size;
                // A whole-file read is "all of it" (an HTTP GET), not "size bytes" (a Range).
                (picked, 0, if write { size.max(xfer) } else { WHOLE })
            }
            Pattern::Sequential => {
                let cursor = if write { &mut self.write_cursor } else { &mut self.read_cursor };
                let live = cursor.file.filter(|&c| {
                    let file = &self.set.files[c as usize];
                    file.alive && cursor.offset < file.size
                });
                let file = match live {
                    Some(c) => c,
                    None => {
                        cursor.offset = 0;
                        picked
                    }
                };
                cursor.file = Some(file);
                let offset = cursor.offset;
                cursor.offset += xfer;
                (file, offset, xfer)
            }
        };
        if !write && self.indexed_reads && self.paths {
            let request = Request::Read { path: String::new(), file: Some(self.indexed_file(file)), offset, len, xfer };
            self.prefetch_next_read();
            return request;
        }
        let path = self.file_path(file);
        if write {
            self.last_written = Some(file);
            let obj = &mut self.set.files[file as usize];
            let end = offset + len;
            // Every prepared file a trial writes is restored afterwards (truncated back to its
            // size; on HTTP, where a write is a whole PUT, stored again).
            if obj.origin == Origin::Prepared {
                self.original_sizes.entry(file).or_insert(obj.size);
            }
            obj.size = obj.size.max(end);
            Request::Write { path, offset, len, xfer }
        } else {
            Request::Read { path, file: None, offset, len, xfer }
        }
    }

    /// Start loading the lines of the file table and the read-path table that the next request
    /// will touch if it reads the file the same draws on a copy of the random state pick, so
    /// that they arrive while this request's system call runs instead of stalling the next one
    /// (BENCHMARKS.md §2: such lines are most of what a read costs over the raw loop). A hint
    /// only: the requests are the same whatever it guesses.
    #[inline(always)]
    fn prefetch_next_read(&self) {
        let mut rng = self.rng.clone();
        if self.chain.is_some() || self.mix.pick(&mut rng) != Op::Read {
            return;
        }
        if let Some(f) = self.set.file_pick.pick(&mut rng) {
            prefetch(&self.set.files[f]);
            if let Some(slot) = self.read_paths.get(f) {
                prefetch(slot);
            }
        }
    }

    /// File `f` for an indexed read, its path formatted on the first read since it last changed.
    #[inline(always)] // a kept path is a lookup and a reference count, in the sender's loop
    fn indexed_file(&mut self, f: u32) -> IndexedFile {
        let path = match self.read_paths.get(f as usize) {
            Some(Some(path)) => path.clone(),
            _ => self.read_path(f),
        };
        IndexedFile { index: f, path }
    }

    /// File `f`'s read path, formatted, and kept when `f` is among the first MAX_SHARED_READ_PATHS.
    #[inline(never)]
    fn read_path(&mut self, f: u32) -> Arc<str> {
        let i = f as usize;
        let path: Arc<str> = self.file_path(f).into();
        if i < MAX_SHARED_READ_PATHS {
            if i >= self.read_paths.len() {
                self.read_paths.resize(self.set.files.len().clamp(i + 1, MAX_SHARED_READ_PATHS), None);
            }
            self.read_paths[i] = Some(path.clone());
        }
        path
    }

    /// File `f` is renamed or removed: its next read formats its path again.
    fn forget_read_path(&mut self, f: u32) {
        if let Some(p) = self.read_paths.get_mut(f as usize) {
            *p = None;
        }
    }
}

/// Ask the CPU to load the cache line holding `value` without waiting for it.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints; it never faults and reads nothing the program sees.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(value as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// A sampled transfer size in bytes: at least one.
fn transfer_size(sample: f64) -> u64 {
    sample.max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn parent_of(path: &str) -> &str {
        path.rsplit_once('/').map_or("", |(dir, _)| dir)
    }

    /// Every request of a long mkdir/rmdir/create/remove/rename stream, applied in order to a
    /// model of the namespace, is one the namespace allows: the generator issues no request
    /// its own object set knows will fail.
    #[test]
    fn no_request_is_invalid_for_the_object_set() {
        let spec = crate::spec::parse(
            r#"{"schema": "peakbench.trial-spec/1", "target": {"kind": "null"}, "seed": 5,
                "load": {"rate": 100, "warmup_s": 0, "runtime_s": 1},
                "fileset": {"seed": 2, "files": 60, "files_per_dir": {"kind": "constant", "value": 10},
                            "dirs_per_dir": {"kind": "constant", "value": 3}, "max_depth": 2,
                            "file_sizes": {"kind": "constant", "value": 4096}},
                "mix": {"mkdir": 0.2, "rmdir": 0.25, "create": 0.1, "remove": 0.15, "rename": 0.1, "getattr": 0.1,
                        "readlink": 0.1}}"#,
        )
        .expect("test spec");
        let set = FileSet::build(&spec.fileset);
        let mut dirs: HashSet<String> = (0..set.dirs.len() as u32)
            .map(|d| {
                let mut p = String::new();
                set.dir_path(d, &mut p);
                p
            })
            .collect();
        let mut files: HashSet<String> = (0..set.files.len() as u32).map(|f| set.file_path(f)).collect();
        let mut generator = Generator::new(&spec, set);
        let mut counts = [0usize; Op::ALL.len()];
        for i in 0..20_000 {
            let (op, request, _) = generator.next();
            counts[op.index()] += 1;
            let ok = match &request {
                Request::Mkdir { path } => dirs.contains(parent_of(path)) && !dirs.contains(path) && dirs.insert(path.clone()),
                Request::Rmdir { path } => {
                    let empty = !files.iter().chain(dirs.iter()).any(|p| parent_of(p) == path && p != path);
                    empty && dirs.remove(path)
                }
                Request::Create { path } => dirs.contains(parent_of(path)) && !files.contains(path) && files.insert(path.clone()),
                Request::Remove { path } => files.remove(path),
                Request::Rename { from, to } => !files.contains(to) && files.remove(from) && files.insert(to.clone()),
                Request::Getattr { path } => files.contains(path),
                other => panic!("request {i}: {other:?} is not in the mix"),
            };
            assert!(ok, "request {i}: {request:?} is invalid for the object set");
        }
        // The file set has no symlinks, so readlink never went out; every other op did.
        assert_eq!(counts[Op::Readlink.index()], 0);
        for op in [Op::Mkdir, Op::Rmdir, Op::Create, Op::Remove, Op::Rename, Op::Getattr] {
            assert!(counts[op.index()] > 1000, "{}: {}", op.name(), counts[op.index()]);
        }
    }

    /// Indexed reads name each file by its current path, whether their path comes back at once, late
    /// (a read in flight while its file is renamed or removed) or never.
    #[test]
    fn an_indexed_read_names_its_file_as_it_is_now_however_its_path_came_back() {
        let spec = crate::spec::parse(
            r#"{"schema": "peakbench.trial-spec/1", "target": {"kind": "null"}, "seed": 7,
                "load": {"rate": 100, "warmup_s": 0, "runtime_s": 1},
                "fileset": {"seed": 3, "files": 40, "files_per_dir": {"kind": "constant", "value": 10},
                            "dirs_per_dir": {"kind": "constant", "value": 2}, "max_depth": 2,
                            "file_sizes": {"kind": "constant", "value": 8192}},
                "mix": {"read": 0.7, "rename": 0.15, "remove": 0.05, "create": 0.1}}"#,
        )
        .expect("test spec");
        let set = FileSet::build(&spec.fileset);
        let mut names: HashMap<u32, String> = (0..set.files.len() as u32).map(|f| (f, set.file_path(f))).collect();
        let mut generator = Generator::new(&spec, set);
        generator.indexed_reads = true;
        let mut in_flight: VecDeque<Request> = VecDeque::new();
        let mut reads = 0;
        for i in 0..20_000 {
            let (_, request, object) = generator.next();
            match &request {
                Request::Read { file: Some(file), .. } => {
                    assert_eq!(Some(&*file.path), names.get(&file.index).map(|n| n.as_str()), "request {i}");
                    reads += 1;
                }
                Request::Rename { to, .. } => _ = names.insert(object.expect("a file"), to.clone()),
                Request::Remove { .. } => _ = names.remove(&object.expect("a file")),
                Request::Create { path } => _ = names.insert(object.expect("a file"), path.clone()),
                other => panic!("request {i}: {other:?} is not in the mix"),
            }
            // Every third request stays in flight for a while; every seventh is never recycled.
            if i % 7 == 0 {
                continue;
            }
            in_flight.push_back(request);
            let keep = if i % 3 == 0 { 5 } else { 0 };
            while in_flight.len() > keep {
                generator.recycle(in_flight.pop_front().expect("a request"));
            }
        }
        assert!(reads > 10_000, "{reads} reads");
    }

    #[test]
    fn a_pick_among_keeps_the_proportions_of_the_ops_it_admits() {
        let weights: std::collections::BTreeMap<Op, f64> = [(Op::Getattr, 0.5), (Op::Rmdir, 0.3), (Op::Read, 0.2)].into_iter().collect();
        let mix = Mix::new(&weights);
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let n = 100_000;
        let getattrs = (0..n).filter(|_| mix.pick_among(&mut rng, |op| op != Op::Rmdir) == Some(Op::Getattr)).count();
        assert!((getattrs as f64 / n as f64 - 0.5 / 0.7).abs() < 0.01, "{getattrs}");
        assert_eq!(mix.pick_among(&mut rng, |_| false), None);
    }
}
