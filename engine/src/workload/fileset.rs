//! The file set: a directory tree generated as a deterministic stream, so a
//! set of N files is a prefix of any larger set of the same layout (prepare
//! augments instead of rebuilding), plus the weighted object sets the
//! generator picks from during a run.

use super::dist::Dist;
use super::objects::{WeightedSet, WEIGHT_SCALE};
use crate::spec::FilesetSpec;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;

/// One item of the layout stream, in creation order (a parent before its children).
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Dir { index: u32, parent: u32 },
    File { index: u32, parent: u32, size: u64 },
    Symlink { index: u32, parent: u32, file: u32 },
}

/// Where an object came from: prepared objects are restored after a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Prepared,
    Created,
}

pub struct FileObj {
    pub parent: u32,
    pub size: u64,
    pub generation: u16, // bumped by rename: f{i} -> f{i}.{generation}
    pub origin: Origin,
    pub alive: bool,
}

pub struct DirObj {
    pub parent: u32, // the root (index 0) is its own parent
    pub origin: Origin,
    pub alive: bool,
}

pub struct SymObj {
    pub parent: u32,
    pub origin: Origin,
}

/// The stream generator. Directory 0 is the file-set root.
pub struct Layout<'a> {
    spec: &'a FilesetSpec,
    rng: Pcg64Mcg,
    queue: VecDeque<(u32, u32)>, // (dir, depth) waiting to be filled
    pending: VecDeque<Item>,
    dirs: u32,
    files: u32,
    symlinks: u32,
}

impl<'a> Layout<'a> {
    pub fn new(spec: &'a FilesetSpec) -> Layout<'a> {
        Layout {
            spec,
            rng: Pcg64Mcg::seed_from_u64(spec.seed ^ 0x6c61_796f_7574),
            queue: VecDeque::from([(0, 0)]),
            pending: VecDeque::new(),
            dirs: 1,
            files: 0,
            symlinks: 0,
        }
    }

    fn fill_next_dir(&mut self) {
        let (dir, depth) = match self.queue.pop_front() {
            Some(d) => d,
            // The tree is exhausted before the wanted file count: grow a new branch at the root.
            None => (self.new_dir(0, 1), 1),
        };
        let s = self.spec;
        let subdirs = if depth < s.max_depth { s.dirs_per_dir.sample_count(&mut self.rng) } else { 0 };
        let files = s.files_per_dir.sample_count(&mut self.rng);
        let symlinks = s.symlinks_per_dir.sample_count(&mut self.rng);
        for _ in 0..subdirs {
            self.new_dir(dir, depth + 1);
        }
        for _ in 0..files {
            let size = s.file_sizes.sample(&mut self.rng).max(0.0) as u64;
            self.pending.push_back(Item::File { index: self.files, parent: dir, size });
            self.files += 1;
        }
        if self.files > 0 {
            for _ in 0..symlinks {
                let file = self.rng.random_range(0..self.files);
                self.pending.push_back(Item::Symlink { index: self.symlinks, parent: dir, file });
                self.symlinks += 1;
            }
        }
    }

    fn new_dir(&mut self, parent: u32, depth: u32) -> u32 {
        let index = self.dirs;
        self.dirs += 1;
        self.pending.push_back(Item::Dir { index, parent });
        self.queue.push_back((index, depth));
        index
    }
}

impl Iterator for Layout<'_> {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        while self.pending.is_empty() {
            self.fill_next_dir();
        }
        self.pending.pop_front()
    }
}

/// The items of a set with `files` files: the stream up to and including the last file, then
/// the symlinks of the last file's directory. A directory's symlinks come after all its files,
/// so without them a set smaller than one directory (specsfs97 asks for 1,000 files per
/// directory) would have none; a link whose file lies beyond the set points at file
/// `index % files` instead, which is in it.
pub fn items(spec: &FilesetSpec) -> impl Iterator<Item = Item> + '_ {
    let wanted = spec.files;
    let mut layout = Layout::new(spec);
    let mut seen = 0u64;
    let mut last_dir: Option<u32> = None;
    std::iter::from_fn(move || loop {
        if let Some(dir) = last_dir {
            // Only what is already queued for this directory: no new directory is started.
            match layout.pending.pop_front()? {
                Item::File { parent, .. } if parent == dir => continue,
                Item::Symlink { index, parent, file } if parent == dir => {
                    let file = if (file as u64) < wanted { file } else { (file as u64 % wanted) as u32 };
                    return Some(Item::Symlink { index, parent, file });
                }
                _ => return None,
            }
        }
        if seen >= wanted {
            return None;
        }
        let item = layout.next()?;
        if let Item::File { parent, .. } = item {
            seen += 1;
            if seen == wanted {
                last_dir = Some(parent);
            }
        }
        return Some(item);
    })
}

/// A stable, private uniform draw per object, independent of stream order.
fn object_uniform(seed: u64, kind: u64, index: u64) -> f64 {
    let mut x = seed ^ kind.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64 // (0, 1]
}

const KIND_FILE: u64 = 1;
const KIND_DIR: u64 = 2;
const KIND_SYMLINK: u64 = 3;
const KIND_ACTIVE: u64 = 4;

/// Popularity weights for `n` objects of one kind, scaled to integers.
struct Popularity<'a> {
    dist: &'a Dist,
    seed: u64,
    kind: u64,
    n: u64,
    scale: f64,
}

impl<'a> Popularity<'a> {
    fn new(dist: &'a Dist, seed: u64, kind: u64, n: u64) -> Self {
        let mut p = Popularity { dist, seed, kind, n, scale: 1.0 };
        let max = (0..n).map(|i| p.raw(i)).fold(0.0f64, f64::max);
        p.scale = if max > 0.0 { WEIGHT_SCALE / max } else { 1.0 };
        p
    }

    fn raw(&self, index: u64) -> f64 {
        let u = object_uniform(self.seed, self.kind, index);
        let mut rng = Pcg64Mcg::seed_from_u64(u.to_bits());
        self.dist.weight(u, self.n, &mut rng)
    }

    /// Objects with any weight at all get at least 1, so none is silently unreachable.
    fn weight(&self, index: u64) -> u64 {
        let w = self.raw(index);
        if w <= 0.0 {
            0
        } else {
            ((w * self.scale).round() as u64).clamp(1, WEIGHT_SCALE as u64)
        }
    }
}

/// The in-memory file set the generator picks from and mutates during a run.
pub struct FileSet {
    pub files: Vec<FileObj>,
    pub dirs: Vec<DirObj>,
    pub symlinks: Vec<SymObj>,
    pub file_pick: WeightedSet,
    pub dir_pick: WeightedSet,
    pub symlink_pick: WeightedSet,
    file_pop: (Dist, u64, f64), // popularity, seed and integer scale, for files created later
    pub prepared_bytes: u64,
}

impl FileSet {
    pub fn build(spec: &FilesetSpec) -> FileSet {
        let mut files = Vec::with_capacity(spec.files as usize);
        let mut dirs = vec![DirObj { parent: 0, origin: Origin::Prepared, alive: true }];
        let mut symlinks = Vec::new();
        let mut bytes = 0;
        for item in items(spec) {
            match item {
                Item::Dir { parent, .. } => dirs.push(DirObj { parent, origin: Origin::Prepared, alive: true }),
                Item::File { parent, size, .. } => {
                    bytes += size;
                    files.push(FileObj { parent, size, generation: 0, origin: Origin::Prepared, alive: true })
                }
                Item::Symlink { parent, .. } => symlinks.push(SymObj { parent, origin: Origin::Prepared }),
            }
        }
        let seed = spec.seed;
        let fp = Popularity::new(&spec.file_popularity, seed, KIND_FILE, files.len() as u64);
        let active = |i: u64| object_uniform(seed, KIND_ACTIVE, i) <= spec.active_fraction;
        let file_pick = WeightedSet::from_weights((0..files.len() as u64).map(|i| if active(i) { fp.weight(i) } else { 0 }));
        let dp = Popularity::new(&spec.dir_popularity, seed, KIND_DIR, dirs.len() as u64);
        let dir_pick = WeightedSet::from_weights((0..dirs.len() as u64).map(|i| dp.weight(i)));
        let sp = Popularity::new(&spec.symlink_popularity, seed, KIND_SYMLINK, symlinks.len() as u64);
        let symlink_pick = WeightedSet::from_weights((0..symlinks.len() as u64).map(|i| sp.weight(i)));
        FileSet { file_pop: (spec.file_popularity.clone(), seed, fp.scale), files, dirs, symlinks, file_pick, dir_pick, symlink_pick, prepared_bytes: bytes }
    }

    /// A file made during the run joins the set with the popularity its index would get.
    pub fn add_file(&mut self, parent: u32) -> u32 {
        let index = self.files.len() as u32;
        let (dist, seed, scale) = &self.file_pop;
        let pop = Popularity { dist, seed: *seed, kind: KIND_FILE, n: index as u64 + 1, scale: *scale };
        self.file_pick.push(pop.weight(index as u64));
        self.files.push(FileObj { parent, size: 0, generation: 0, origin: Origin::Created, alive: true });
        index
    }

    pub fn remove_file(&mut self, index: u32) {
        self.files[index as usize].alive = false;
        self.file_pick.remove(index as usize);
    }

    /// A directory made during the run is not a target for creates, so rmdir finds it empty.
    pub fn add_dir(&mut self, parent: u32) -> u32 {
        self.dirs.push(DirObj { parent, origin: Origin::Created, alive: true });
        self.dir_pick.push(0);
        (self.dirs.len() - 1) as u32
    }

    pub fn add_symlink(&mut self, parent: u32) -> u32 {
        self.symlinks.push(SymObj { parent, origin: Origin::Created });
        let w = if self.symlink_pick.is_empty() { WEIGHT_SCALE as u64 } else { (self.symlink_pick.total() / self.symlink_pick.len() as u64).max(1) };
        self.symlink_pick.push(w);
        (self.symlinks.len() - 1) as u32
    }

    pub fn dir_path(&self, index: u32, out: &mut String) {
        // Ancestors from the bottom up (depth is bounded by max_depth, plus grown branches).
        let mut chain = [0u32; 16];
        let mut depth = 0;
        let mut d = index;
        while d != 0 && depth < chain.len() {
            chain[depth] = d;
            depth += 1;
            d = self.dirs[d as usize].parent;
        }
        if d != 0 {
            // Deeper than the stack buffer: recurse for the rest.
            self.dir_path(d, out);
        }
        for &d in chain[..depth].iter().rev() {
            if !out.is_empty() {
                out.push('/');
            }
            out.push('d');
            push_num(out, d as u64);
        }
    }

    /// Path of a file relative to the file-set root.
    pub fn file_path(&self, index: u32) -> String {
        let mut p = String::with_capacity(48);
        self.write_file_path(index, &mut p);
        p
    }

    /// The same, into `out` (cleared first), so a caller can reuse one allocation.
    pub fn write_file_path(&self, index: u32, out: &mut String) {
        out.clear();
        self.dir_path(self.files[index as usize].parent, out);
        if !out.is_empty() {
            out.push('/');
        }
        self.push_file_name(index, out);
    }

    pub fn file_name(&self, index: u32) -> String {
        let mut name = String::with_capacity(16);
        self.push_file_name(index, &mut name);
        name
    }

    pub fn push_file_name(&self, index: u32, out: &mut String) {
        let f = &self.files[index as usize];
        out.push(if f.origin == Origin::Prepared { 'f' } else { 'n' });
        push_num(out, index as u64);
        if f.generation > 0 {
            out.push('.');
            push_num(out, f.generation as u64);
        }
    }

    pub fn symlink_path(&self, index: u32) -> String {
        let s = &self.symlinks[index as usize];
        let mut p = String::with_capacity(48);
        self.dir_path(s.parent, &mut p);
        if !p.is_empty() {
            p.push('/');
        }
        p.push(if s.origin == Origin::Prepared { 's' } else { 't' });
        push_num(&mut p, index as u64);
        p
    }

    /// What a symlink points at: the file's path from the link's own directory.
    pub fn symlink_target(&self, parent: u32, file: u32) -> String {
        let mut depth = 0;
        let mut d = parent;
        while d != 0 {
            depth += 1;
            d = self.dirs[d as usize].parent;
        }
        "../".repeat(depth) + &self.file_path(file)
    }
}

/// Decimal digits of n, without core::fmt (this runs once or twice per request): two digits per
/// division, written straight into the string's spare capacity (push per char checks capacity and
/// encodes UTF-8 each time; push_str calls memcpy for a few bytes).
fn push_num(s: &mut String, mut n: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
                                5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while n >= 100 {
        let d = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i] = PAIRS[d];
        buf[i + 1] = PAIRS[d + 1];
    }
    if n >= 10 {
        let d = n as usize * 2;
        i -= 2;
        buf[i] = PAIRS[d];
        buf[i + 1] = PAIRS[d + 1];
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    let digits = &buf[i..];
    s.reserve(digits.len());
    // SAFETY: ASCII digits keep the string UTF-8; `reserve` made room for them past its length.
    unsafe {
        let v = s.as_mut_vec();
        let end = v.as_mut_ptr().add(v.len());
        for (k, &d) in digits.iter().enumerate() {
            end.add(k).write(d);
        }
        v.set_len(v.len() + digits.len());
    }
}

/// A short, stable id of the layout (every field except the file count), naming its directory.
pub fn layout_id(spec: &FilesetSpec) -> String {
    let mut shape = spec.clone();
    shape.files = 0;
    let text = serde_json::to_string(&shape).expect("fileset spec serialises");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("fs-{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(files: u64) -> FilesetSpec {
        serde_json::from_str(&format!(
            r#"{{"seed": 5, "files": {files}, "files_per_dir": {{"kind":"uniform","low":2,"high":8}},
                "dirs_per_dir": {{"kind":"constant","value":3}}, "symlinks_per_dir": {{"kind":"constant","value":1}}, "max_depth": 2,
                "file_sizes": {{"kind":"lognormal","mean":10500,"median":1300}},
                "file_popularity": {{"kind":"zipf","alpha":0.8}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn smaller_sets_are_prefixes_of_larger_ones() {
        let small: Vec<Item> = items(&spec(100)).collect();
        let large: Vec<Item> = items(&spec(1000)).collect();
        assert_eq!(small.iter().filter(|i| matches!(i, Item::File { .. })).count(), 100);
        // Files and directories in the same order; the same symlinks by index and directory, only
        // a link of the last directory pointing past the small set points at `file % 100` in it.
        let link = |i: &&Item| matches!(i, Item::Symlink { .. });
        let (small_links, small_rest): (Vec<&Item>, Vec<&Item>) = small.iter().partition(link);
        let (large_links, large_rest): (Vec<&Item>, Vec<&Item>) = large.iter().partition(link);
        assert_eq!(&large_rest[..small_rest.len()], &small_rest[..]);
        assert!(!small_links.is_empty());
        for (s, l) in small_links.iter().zip(&large_links) {
            let (Item::Symlink { index: a, parent: p, file: f }, Item::Symlink { index: b, parent: q, file: g }) = (s, l) else { unreachable!() };
            assert_eq!((a, p), (b, q));
            assert!(f == g || (*g >= 100 && *f == g % 100), "link {a}: {f} in the small set, {g} in the large");
        }
        assert_eq!(layout_id(&spec(100)), layout_id(&spec(1000)));
    }

    #[test]
    fn tree_respects_max_depth_and_grows_new_branches() {
        let set = FileSet::build(&spec(5000));
        assert_eq!(set.files.len(), 5000);
        for (i, _) in set.dirs.iter().enumerate() {
            let mut p = String::new();
            set.dir_path(i as u32, &mut p);
            assert!(p.matches('/').count() < 2, "too deep: {p}");
        }
    }

    #[test]
    fn same_seed_same_layout_other_seed_other_layout() {
        let a: Vec<Item> = items(&spec(300)).collect();
        assert_eq!(a, items(&spec(300)).collect::<Vec<_>>());
        let mut other = spec(300);
        other.seed = 6;
        assert_ne!(a, items(&other).collect::<Vec<_>>());
        assert_ne!(layout_id(&spec(1)), layout_id(&other));
    }

    #[test]
    fn zipf_popularity_is_skewed() {
        let set = FileSet::build(&spec(10_000));
        let mut w: Vec<u64> = (0..set.files.len()).map(|i| set.file_pick.weight(i)).collect();
        w.sort_unstable_by(|a, b| b.cmp(a));
        let total: u64 = w.iter().sum();
        let top_1pct: u64 = w[..100].iter().sum();
        // Exact Zipf(0.8) over 10k ranks: the top 1% of files draw 30.0% of accesses.
        let share = top_1pct as f64 / total as f64;
        assert!((share - 0.300).abs() < 0.02, "top-1% share {share}");
    }

    #[test]
    fn paths_name_every_ancestor() {
        let set = FileSet::build(&spec(5000));
        for d in 0..set.dirs.len() as u32 {
            let mut p = String::new();
            set.dir_path(d, &mut p);
            // The reference: parent's path, then this directory's name.
            let mut want = String::new();
            if d != 0 {
                set.dir_path(set.dirs[d as usize].parent, &mut want);
                if !want.is_empty() {
                    want.push('/');
                }
                want.push_str(&format!("d{d}"));
            }
            assert_eq!(p, want);
        }
        let f = 4321;
        let mut dir = String::new();
        set.dir_path(set.files[f].parent, &mut dir);
        let want = if dir.is_empty() { format!("f{f}") } else { format!("{dir}/f{f}") };
        assert_eq!(set.file_path(f as u32), want);
        let mut s = String::new();
        for n in [0u64, 7, 10, 99, 100, 1000, 12_345, 4_294_967_295, u64::MAX] {
            s.clear();
            push_num(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }

    #[test]
    fn created_files_get_comparable_weights() {
        let mut set = FileSet::build(&spec(1000));
        let before = set.file_pick.total();
        let i = set.add_file(0);
        assert!(set.file_pick.weight(i as usize) > 0);
        assert!(set.file_pick.weight(i as usize) <= before / 10);
        assert!(set.file_path(i).starts_with('n'));
    }
}
