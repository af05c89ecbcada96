//! Byte strings numbered in order of first appearance. Each keeps its hash, so a
//! block's table folds into the log's without hashing its strings again, and a probe
//! compares bytes only when the hashes agree.

use std::hash::Hasher;

/// FxHash over 8-byte words: interning millions of request targets is the parser's hot
/// spot, and SipHash's DoS resistance buys nothing for a log we read ourselves.
#[derive(Default)]
pub struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7cc1_b727_220a_95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 8];
            w[..tail.len()].copy_from_slice(tail);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn finish(&self) -> u64 {
        // The multiply mixes upward: bring the mixed high bits down to the low ones a table indexes by.
        self.0.rotate_left(26)
    }
}

/// Fx over the length and the 8-byte words of `bytes`, the last word ending at its end
/// (overlapping the one before): copying a ragged tail into a zeroed word was a memcpy
/// call that made hashing a target 1.3–1.8× slower.
pub fn hash(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let mut h = Fx(n as u64);
    if n >= 8 {
        let mut at = 0;
        while at + 8 < n {
            h.add(word(at));
            at += 8;
        }
        h.add(word(n - 8));
    } else {
        h.add(bytes.iter().fold(0, |w, &c| w << 8 | c as u64));
    }
    h.finish()
}

#[derive(Default)]
pub struct Interner {
    /// Per string its number and length (u32 each), its largest value (u64; all
    /// little-endian) and its bytes: a probe whose hash agrees finds all it compares and
    /// updates in one place.
    entries: Vec<u8>,
    /// Per string: where its entry starts, and its hash.
    starts: Vec<usize>,
    hashes: Vec<u64>,
    /// Open addressing, at most half full: per slot the high bits of the string's hash
    /// and its entry's start + 1 (0 for empty), so a probe reads an entry only when the
    /// hashes agree (each read is a cache miss in a table of many thousand targets).
    slots: Vec<u64>,
}

const START_BITS: u32 = 40;
const START_MASK: u64 = (1 << START_BITS) - 1;
const HEADER: usize = 16;
const VALUE_AT: usize = 8;

/// A slot holding the entry at `start` of a string of hash `hash`.
fn slot(start: usize, hash: u64) -> u64 {
    assert!((start as u64) < START_MASK, "a table of targets of less than a TiB");
    hash & !START_MASK | (start as u64 + 1)
}

/// `a == b` for the short strings request targets mostly are, without a memcmp call per
/// hit: lengths of 8 to 16 compare as two overlapping words.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

#[inline]
fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at as *const T as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at; // elsewhere lookups just wait for memory
}

impl Interner {
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        self.entry(self.starts[i]).1
    }

    /// The number and bytes of the entry at `start`.
    #[inline]
    fn entry(&self, start: usize) -> (u32, &[u8]) {
        let word = |at: usize| u32::from_le_bytes(self.entries[at..at + 4].try_into().expect("4 bytes"));
        let bytes = start + HEADER;
        (word(start), &self.entries[bytes..bytes + word(start + 4) as usize])
    }

    /// Raise the value of the entry at `start` to `value`; whether it was lower.
    #[inline]
    fn raise(&mut self, start: usize, value: u64) -> bool {
        let field: &mut [u8; 8] = (&mut self.entries[start + VALUE_AT..start + HEADER]).try_into().expect("8 bytes");
        let raised = value > u64::from_le_bytes(*field);
        if raised {
            *field = value.to_le_bytes();
        }
        raised
    }

    pub fn hash_of(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// Ask for the slot where a lookup of `hash` starts (it comes in while the caller works on).
    #[inline]
    pub fn prefetch_slot(&self, hash: u64) {
        if let Some(slot) = self.slots.get(hash as usize & self.slots.len().wrapping_sub(1)) {
            prefetch(slot);
        }
    }

    /// Ask for the entry of the string in the slot where a lookup of `hash` starts, if its hash agrees.
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(&s) = self.slots.get(hash as usize & self.slots.len().wrapping_sub(1)) {
            if s != 0 && s & !START_MASK == hash & !START_MASK {
                prefetch(&self.entries[(s & START_MASK) as usize - 1]);
            }
        }
    }

    /// The number of `bytes` (whose `hash` it is), whether it is new, and whether `value`
    /// raised the largest value it has been inserted with (each string starts at 0).
    pub fn insert(&mut self, bytes: &[u8], hash: u64, value: u64) -> (u32, bool, bool) {
        if 2 * (self.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let tag = hash & !START_MASK;
        let mut at = hash as usize & mask;
        while let s @ 1.. = self.slots[at] {
            if s & !START_MASK == tag {
                let start = (s & START_MASK) as usize - 1;
                let (i, found) = self.entry(start);
                if same(found, bytes) {
                    return (i, false, self.raise(start, value));
                }
            }
            at = (at + 1) & mask;
        }
        let i = u32::try_from(self.len()).expect("fewer strings than a block's or a log's lines, counted in u32 by the caller");
        let len = u32::try_from(bytes.len()).expect("a log line of less than 4 GiB");
        let start = self.entries.len();
        self.entries.extend_from_slice(&i.to_le_bytes());
        self.entries.extend_from_slice(&len.to_le_bytes());
        self.entries.extend_from_slice(&value.to_le_bytes());
        self.entries.extend_from_slice(bytes);
        self.starts.push(start);
        self.hashes.push(hash);
        self.slots[at] = slot(start, hash);
        (i, true, value > 0)
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1 << 12);
        let mut slots = vec![0u64; size];
        for (&start, &h) in self.starts.iter().zip(&self.hashes) {
            let mut at = h as usize & (size - 1);
            while slots[at] != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = slot(start, h);
        }
        self.slots = slots;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_keep_their_first_number_through_growth() {
        let mut t = Interner::default();
        let words: Vec<Vec<u8>> = (0..10_000).map(|i| format!("/d{}/f{i}.html", i % 97).into_bytes()).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.insert(w, hash(w), 0), (i as u32, true, false));
        }
        for (i, w) in words.iter().enumerate().rev() {
            assert_eq!(t.insert(w, hash(w), 0), (i as u32, false, false));
            assert_eq!(t.get(i), &w[..]);
        }
        // The length is hashed too: a string and the same string with a zero byte added differ.
        assert_ne!(hash(b"a"), hash(b"a\0"));
        assert_eq!(t.insert(b"", hash(b""), 0), (10_000, true, false));
    }

    #[test]
    fn each_string_keeps_the_largest_value_it_came_with() {
        let mut t = Interner::default();
        let (a, b) = (&b"/same/length/a.html"[..], &b"/same/length/b.html"[..]);
        assert_eq!(t.insert(a, hash(a), 300), (0, true, true));
        assert_eq!(t.insert(b, hash(b), 0), (1, true, false));
        assert_eq!(t.insert(a, hash(a), 200), (0, false, false));
        assert_eq!(t.insert(a, hash(a), 300), (0, false, false));
        assert_eq!(t.insert(a, hash(a), 301), (0, false, true));
        assert_eq!(t.insert(b, hash(b), 1), (1, false, true));
    }
}
