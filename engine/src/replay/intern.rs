//! Byte strings numbered in order of first appearance: by their bytes (`Interner`) or,
//! where each lookup must cost one cache miss, by their fingerprint (`Numbers`).

/// A request target's 128-bit hash (xxh3): the workers tell targets apart by it alone
/// (`Numbers`), and its low half indexes every table of targets.
pub fn fingerprint(bytes: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(bytes)
}

#[derive(Default)]
pub struct Interner {
    /// Per string its number and length (u32 each, little-endian) and its bytes: a
    /// probe whose hash agrees finds all it compares in one place.
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
const HEADER: usize = 8;

/// A slot holding the entry at `start` of a string of hash `hash`.
fn slot(start: usize, hash: u64) -> u64 {
    assert!((start as u64) < START_MASK, "a table of targets of less than a TiB");
    hash & !START_MASK | (start as u64 + 1)
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

    pub fn hash_of(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// The number of `bytes` (whose `hash` it is), and whether it is new.
    pub fn insert(&mut self, bytes: &[u8], hash: u64) -> (u32, bool) {
        if 2 * (self.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let tag = hash & !START_MASK;
        let mut at = hash as usize & mask;
        while let s @ 1.. = self.slots[at] {
            if s & !START_MASK == tag {
                let (i, found) = self.entry((s & START_MASK) as usize - 1);
                if found == bytes {
                    return (i, false);
                }
            }
            at = (at + 1) & mask;
        }
        let i = u32::try_from(self.len()).expect("fewer strings than a block's or a log's lines, counted in u32 by the caller");
        let len = u32::try_from(bytes.len()).expect("a log line of less than 4 GiB");
        let start = self.entries.len();
        self.entries.extend_from_slice(&i.to_le_bytes());
        self.entries.extend_from_slice(&len.to_le_bytes());
        self.entries.extend_from_slice(bytes);
        self.starts.push(start);
        self.hashes.push(hash);
        self.slots[at] = slot(start, hash);
        (i, true)
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

/// Strings numbered by their fingerprint alone, in order of first appearance, each with
/// the largest value it came with: a lookup reads one 16-byte slot (one cache miss, which
/// the caller asks for ahead), where comparing bytes would add a second, dependent one.
/// Two strings are taken for one only if 96 bits of their fingerprints agree: for a log of
/// 10^8 distinct targets, odds of about 6 in 10^14.
#[derive(Default)]
pub struct Numbers {
    /// Open addressing, at most half full.
    slots: Vec<Slot>,
    largest: Vec<u64>,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    low: u64,
    high: u32,
    /// The string's number + 1; 0 for an empty slot.
    number: u32,
}

impl Numbers {
    pub fn len(&self) -> usize {
        self.largest.len()
    }

    /// Ask for the slot where a lookup of `fingerprint` starts (it comes in while the caller works on).
    #[inline]
    pub fn prefetch(&self, fingerprint: u128) {
        if let Some(slot) = self.slots.get(fingerprint as usize & self.slots.len().wrapping_sub(1)) {
            prefetch(slot);
        }
    }

    /// Ask for the largest value of string `number`.
    #[inline]
    pub fn prefetch_largest(&self, number: u32) {
        prefetch(&self.largest[number as usize]);
    }

    /// The number of the string of `fingerprint`, and whether it is new.
    #[inline]
    pub fn number(&mut self, fingerprint: u128) -> (u32, bool) {
        if 2 * (self.len() + 1) > self.slots.len() {
            self.grow();
        }
        let (low, high) = (fingerprint as u64, (fingerprint >> 64) as u32);
        let mask = self.slots.len() - 1;
        let mut at = low as usize & mask;
        while self.slots[at].number != 0 {
            let s = self.slots[at];
            if s.low == low && s.high == high {
                return (s.number - 1, false);
            }
            at = (at + 1) & mask;
        }
        let number = u32::try_from(self.len()).expect("fewer strings than a block's or a log's lines, counted in u32 by the caller");
        self.slots[at] = Slot { low, high, number: number + 1 };
        self.largest.push(0);
        (number, true)
    }

    /// Raise the largest value of string `number` to `value`; whether it was lower.
    #[inline]
    pub fn raise(&mut self, number: u32, value: u64) -> bool {
        let largest = &mut self.largest[number as usize];
        let raised = value > *largest;
        if raised {
            *largest = value;
        }
        raised
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1 << 12);
        let mut slots = vec![Slot::default(); size];
        for s in self.slots.iter().filter(|s| s.number != 0) {
            let mut at = s.low as usize & (size - 1);
            while slots[at].number != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = *s;
        }
        self.slots = slots;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(bytes: &[u8]) -> u64 {
        fingerprint(bytes) as u64
    }

    #[test]
    fn strings_keep_their_first_number_through_growth() {
        let mut t = Interner::default();
        let words: Vec<Vec<u8>> = (0..10_000).map(|i| format!("/d{}/f{i}.html", i % 97).into_bytes()).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.insert(w, hash(w)), (i as u32, true));
        }
        for (i, w) in words.iter().enumerate().rev() {
            assert_eq!(t.insert(w, hash(w)), (i as u32, false));
            assert_eq!(t.get(i), &w[..]);
        }
        assert_eq!(t.insert(b"", hash(b"")), (10_000, true));
    }

    #[test]
    fn fingerprints_number_strings_as_their_bytes_do() {
        // A million targets, many alike but for a byte or their length: no two share a number.
        let mut n = Numbers::default();
        let target = |i: usize| format!("/d{}/f{}.html{}", i % 997, i / 997, "\0".repeat(i % 3)).into_bytes();
        for i in 0..1_000_000 {
            assert_eq!(n.number(fingerprint(&target(i))), (i as u32, true), "target {i}");
        }
        for i in (0..1_000_000).step_by(7) {
            assert_eq!(n.number(fingerprint(&target(i))), (i as u32, false), "target {i}");
        }
        assert_eq!(n.len(), 1_000_000);
    }

    #[test]
    fn each_string_keeps_the_largest_value_it_came_with() {
        let mut n = Numbers::default();
        let (a, b) = (n.number(fingerprint(b"/same/length/a.html")).0, n.number(fingerprint(b"/same/length/b.html")).0);
        assert!(n.raise(a, 300));
        assert!(!n.raise(b, 0));
        assert!(!n.raise(a, 200));
        assert!(!n.raise(a, 300));
        assert!(n.raise(a, 301));
        assert!(n.raise(b, 1));
    }
}
