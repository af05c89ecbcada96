//! A block's structural index: one bit per byte for each newline, space and quote, found
//! 64 bytes at a time with AVX2. The Common/Combined scan then finds each field's end with
//! a mask and a trailing-zero count instead of reading the line byte by byte.

/// Where a byte first occurs within positions from..to of a line.
pub trait Find {
    fn find(&self, byte: u8, from: usize, to: usize) -> Option<usize>;
}

/// The bytes indexed, in the order of each chunk's masks.
const BYTES: [u8; 3] = [b'\n', b' ', b'"'];

/// Lines this long or shorter are searched in masks of their own bytes (`Short`).
pub const SHORT: usize = 128;

#[derive(Default)]
pub struct Index {
    /// Per 64 bytes of the block, per byte of BYTES: bit i set where byte i is that byte.
    masks: Vec<[u64; 3]>,
}

impl Index {
    /// Index `data`; false, with nothing indexed, on a CPU without AVX2 (the caller then
    /// searches the bytes themselves).
    pub fn build(&mut self, data: &[u8]) -> bool {
        self.masks.clear();
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present.
            unsafe { avx2::index(data, &mut self.masks) };
            return true;
        }
        let _ = data; // elsewhere the scan searches the bytes
        false
    }

    /// The first position in from..to of the block holding `byte` (one of BYTES).
    #[inline(always)]
    pub fn next(&self, byte: u8, from: usize, to: usize) -> Option<usize> {
        if from >= to {
            return None;
        }
        let which = BYTES.iter().position(|&b| b == byte).expect("the index holds newlines, spaces and quotes");
        let mut word = from / 64;
        let mut bits = self.masks[word][which] & (!0u64 << (from % 64));
        while bits == 0 {
            word += 1;
            if word * 64 >= to {
                return None;
            }
            bits = self.masks[word][which];
        }
        let at = word * 64 + bits.trailing_zeros() as usize;
        (at < to).then_some(at)
    }

    /// The line starting at `start` of the block, positions counted from its start.
    pub fn line(&self, start: usize) -> Line<'_> {
        Line { index: self, start }
    }

    /// The line of at most SHORT bytes starting at `start`: its spaces and quotes as one bit
    /// per byte from its start (and bits of what follows it, which its searches ignore).
    #[inline(always)]
    pub fn short(&self, start: usize) -> Short {
        let (word, shift) = (start / 64, start % 64);
        let from = |which: usize| {
            let get = |w: usize| self.masks.get(w).map_or(0, |m| m[which]) as u128;
            let (low, high) = (get(word) | get(word + 1) << 64, get(word + 2));
            low >> shift | high.checked_shl(128 - shift as u32).unwrap_or(0)
        };
        Short { spaces: from(1), quotes: from(2) }
    }
}

pub struct Short {
    spaces: u128,
    quotes: u128,
}

impl Find for Short {
    #[inline(always)]
    fn find(&self, byte: u8, from: usize, to: usize) -> Option<usize> {
        if from >= to {
            return None;
        }
        let bits = match byte {
            b' ' => self.spaces,
            b'"' => self.quotes,
            _ => panic!("a short line's masks hold spaces and quotes"),
        };
        let at = from + (bits >> from).trailing_zeros() as usize;
        (at < to).then_some(at)
    }
}

pub struct Line<'a> {
    index: &'a Index,
    start: usize,
}

impl Find for Line<'_> {
    #[inline(always)]
    fn find(&self, byte: u8, from: usize, to: usize) -> Option<usize> {
        self.index.next(byte, self.start + from, self.start + to).map(|at| at - self.start)
    }
}

fn padded(tail: &[u8]) -> [u8; 64] {
    let mut chunk = [0u8; 64];
    chunk[..tail.len()].copy_from_slice(tail);
    chunk
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::BYTES;
    use std::arch::x86_64::*;

    /// Append the masks of each 64 bytes of `data` to `masks`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn index(data: &[u8], masks: &mut Vec<[u64; 3]>) {
        let wanted = BYTES.map(|byte| _mm256_set1_epi8(byte as i8));
        let of = |chunk: &[u8]| {
            // SAFETY: AVX2 is present (this function's feature), and the chunk holds 64 bytes.
            let (lo, hi) = unsafe { (_mm256_loadu_si256(chunk.as_ptr() as *const __m256i), _mm256_loadu_si256(chunk.as_ptr().add(32) as *const __m256i)) };
            wanted.map(|w| {
                let (l, h) = (_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, w)), _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, w)));
                l as u32 as u64 | (h as u32 as u64) << 32
            })
        };
        masks.reserve(data.len().div_ceil(64));
        let mut chunks = data.chunks_exact(64);
        masks.extend((&mut chunks).map(of));
        if !chunks.remainder().is_empty() {
            masks.push(of(&super::padded(chunks.remainder())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_finds_what_a_byte_search_finds() {
        // Lines of every length up to 200 one after another, so fields and line ends fall on
        // every offset within and across 64-byte chunks, and a tail shorter than a chunk.
        let mut data = Vec::new();
        for len in 0..200 {
            data.extend((0..len).map(|i| b"ab \"c"[(i * 7 + len) % 5]));
            data.push(b'\n');
        }
        data.extend_from_slice(b"x \"y");
        let mut index = Index::default();
        if !index.build(&data) {
            eprintln!("no AVX2 here: the index is not used");
            return;
        }
        for byte in BYTES {
            for from in (0..data.len()).step_by(3) {
                for to in [from, from + 1, from + 63, from + 64, from + 200, data.len()] {
                    let to = to.min(data.len());
                    let expected = data[from..to].iter().position(|&c| c == byte).map(|i| from + i);
                    assert_eq!(index.next(byte, from, to), expected, "{byte} {from}..{to}");
                    if byte != b'\n' && to - from <= SHORT {
                        let short = index.short(from).find(byte, 0, to - from).map(|i| from + i);
                        assert_eq!(short, expected, "short: {byte} {from}..{to}");
                    }
                }
            }
        }
    }
}
