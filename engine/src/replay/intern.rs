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

pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = Fx::default();
    h.write(bytes);
    h.add(bytes.len() as u64);
    h.finish()
}

#[derive(Default)]
pub struct Interner {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<u64>,
    /// Open addressing: index + 1 of the string in each slot, 0 for empty; at most half full.
    slots: Vec<u32>,
}

impl Interner {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub fn hash_of(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// The number of `s` (whose `hash` it is), and whether it is new.
    pub fn insert(&mut self, s: &[u8], hash: u64) -> (u32, bool) {
        if 2 * (self.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            match self.slots[at] {
                0 => break,
                n if self.hashes[n as usize - 1] == hash && self.get(n as usize - 1) == s => return (n - 1, false),
                _ => at = (at + 1) & mask,
            }
        }
        let i = u32::try_from(self.len()).expect("fewer strings than a block's or a log's lines, counted in u32 by the caller");
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
        self.slots[at] = i + 1;
        (i, true)
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1 << 12);
        let mut slots = vec![0u32; size];
        for (i, &h) in self.hashes.iter().enumerate() {
            let mut at = h as usize & (size - 1);
            while slots[at] != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = i as u32 + 1;
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
            assert_eq!(t.insert(w, hash(w)), (i as u32, true));
        }
        for (i, w) in words.iter().enumerate().rev() {
            assert_eq!(t.insert(w, hash(w)), (i as u32, false));
            assert_eq!(t.get(i), &w[..]);
        }
        // Same words, different lengths: the zero padding of the last word does not make them equal.
        assert_ne!(hash(b"a"), hash(b"a\0"));
        assert_eq!(t.insert(b"", hash(b"")), (10_000, true));
    }
}
