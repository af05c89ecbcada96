//! Where a block's newlines, spaces and quotes are: a bitmask of each per 64 bytes,
//! built in one vectorised pass. Lines, and the fields of Common and Combined lines,
//! are then found by counting trailing zeros instead of searching byte by byte.

/// Bit i of each mask is byte i of the 64.
#[derive(Clone, Copy, Default)]
pub struct Chunk {
    newlines: u64,
    spaces: u64,
    quotes: u64,
}

fn newlines(c: &Chunk) -> u64 {
    c.newlines
}
fn spaces(c: &Chunk) -> u64 {
    c.spaces
}
fn quotes(c: &Chunk) -> u64 {
    c.quotes
}

/// A block's masks; kept by a worker from block to block so that its buffer is reused.
#[derive(Default)]
pub struct Index {
    /// One per 64 bytes of the block, the last zero-padded, then one of zeros, so that a
    /// 64-bit window starting anywhere in the block has two chunks to read.
    chunks: Vec<Chunk>,
    len: usize,
}

/// The masks of 64 bytes, a byte at a time: the reference the vector code is tested
/// against, and what runs where it cannot.
fn chunk_portable(bytes: &[u8; 64]) -> Chunk {
    let mut c = Chunk::default();
    for (i, &b) in bytes.iter().enumerate() {
        c.newlines |= ((b == b'\n') as u64) << i;
        c.spaces |= ((b == b' ') as u64) << i;
        c.quotes |= ((b == b'"') as u64) << i;
    }
    c
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
/// SAFETY: the caller has checked that the CPU has AVX2.
unsafe fn chunks_avx2(whole: &[[u8; 64]], out: &mut Vec<Chunk>) {
    use std::arch::x86_64::*;
    let (newline, space, quote) = (_mm256_set1_epi8(b'\n' as i8), _mm256_set1_epi8(b' ' as i8), _mm256_set1_epi8(b'"' as i8));
    for bytes in whole {
        // SAFETY: both loads read 32 bytes within the 64 of `bytes` (unaligned loads).
        let (low, high) = unsafe { (_mm256_loadu_si256(bytes.as_ptr().cast()), _mm256_loadu_si256(bytes.as_ptr().add(32).cast())) };
        let mask = |of| {
            let half = |v| _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, of)) as u32 as u64;
            half(low) | half(high) << 32
        };
        out.push(Chunk { newlines: mask(newline), spaces: mask(space), quotes: mask(quote) });
    }
}

impl Index {
    /// Index `block` (replacing what was indexed before).
    pub fn build(&mut self, block: &[u8]) {
        self.chunks.clear();
        self.chunks.reserve(block.len() / 64 + 2);
        self.len = block.len();
        let (whole, tail) = block.as_chunks::<64>();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            unsafe { chunks_avx2(whole, &mut self.chunks) };
        }
        if self.chunks.is_empty() {
            self.chunks.extend(whole.iter().map(chunk_portable));
        }
        let mut last = [0u8; 64];
        last[..tail.len()].copy_from_slice(tail);
        self.chunks.push(chunk_portable(&last));
        self.chunks.push(Chunk::default());
    }

    /// The 64 bits of `mask` for bytes `at..at + 64` (zeros past the block's end); `at` within the block.
    #[inline(always)]
    fn window(&self, mask: fn(&Chunk) -> u64, at: usize) -> u64 {
        let (i, shift) = (at / 64, at % 64);
        // Two shifts, because shifting a u64 by 64 is not zero.
        mask(&self.chunks[i]) >> shift | (mask(&self.chunks[i + 1]) << 1) << (63 - shift)
    }

    /// The first space in `from..to`.
    #[inline(always)]
    pub fn space(&self, from: usize, to: usize) -> Option<usize> {
        self.nth_space(from, to, 1)
    }

    /// The `n`th space (from 1) in `from..to`: the first three of a line are mostly in one window.
    #[inline(always)]
    pub fn nth_space(&self, mut from: usize, to: usize, mut n: u32) -> Option<usize> {
        while from < to {
            let mut bits = self.window(spaces, from);
            let count = bits.count_ones();
            if count >= n {
                for _ in 1..n {
                    bits &= bits - 1;
                }
                return Some(from + bits.trailing_zeros() as usize).filter(|&i| i < to);
            }
            n -= count;
            from += 64;
        }
        None
    }

    /// The block's lines, in order.
    pub fn lines(&self) -> Lines<'_> {
        let first = |mask: fn(&Chunk) -> u64| Cursor { chunk: 0, bits: self.chunks.first().map_or(0, mask) };
        Lines { index: self, newline: first(newlines), quote: first(quotes), start: 0 }
    }
}

/// The set bits of one mask, in order.
struct Cursor {
    chunk: usize,
    /// The chunk's bits not yet taken.
    bits: u64,
}

impl Cursor {
    /// Where the next set bit is (the block's length when there is none).
    #[inline(always)]
    fn peek(&mut self, index: &Index, mask: fn(&Chunk) -> u64) -> usize {
        while self.bits == 0 {
            if self.chunk + 1 >= index.chunks.len() {
                return index.len;
            }
            self.chunk += 1;
            self.bits = mask(&index.chunks[self.chunk]);
        }
        // The last chunk's padding is zeros, which no mask has: a set bit is inside the block.
        self.chunk * 64 + self.bits.trailing_zeros() as usize
    }

    #[inline(always)]
    fn take(&mut self) {
        self.bits &= self.bits.wrapping_sub(1);
    }
}

/// Quotes a line's scan needs to see: Combined has six.
pub const QUOTES: usize = 6;

/// One line of a block: `start..end` without its line end (any `\r` or `\n` at its end).
pub struct Line {
    pub start: usize,
    pub end: usize,
    /// Where the line's first quotes are, and how many it has in all.
    pub quotes: [usize; QUOTES],
    pub quote_count: usize,
}

pub struct Lines<'a> {
    index: &'a Index,
    newline: Cursor,
    quote: Cursor,
    start: usize,
}

impl Lines<'_> {
    /// The line starting where the last one ended, its `\r`s and `\n`s trimmed by `block`.
    #[inline(always)]
    pub fn next(&mut self, block: &[u8]) -> Option<Line> {
        let index = self.index;
        if self.start >= index.len {
            return None;
        }
        let newline = self.newline.peek(index, newlines);
        self.newline.take();
        let mut line = Line { start: self.start, end: newline, quotes: [0; QUOTES], quote_count: 0 };
        loop {
            let q = self.quote.peek(index, quotes);
            if q >= newline {
                break;
            }
            if line.quote_count < QUOTES {
                line.quotes[line.quote_count] = q;
            }
            line.quote_count += 1;
            self.quote.take();
        }
        while line.end > line.start && matches!(block[line.end - 1], b'\n' | b'\r') {
            line.end -= 1;
        }
        self.start = newline + 1;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quotes_and_spaces_are_where_a_byte_by_byte_search_finds_them() {
        // Lines of every length around the 64-byte chunks, quotes and spaces anywhere,
        // blank lines, \r\n ends and a last line without its newline.
        let mut block = Vec::new();
        for n in 0..300usize {
            for k in 0..n {
                block.push(match (k * 7 + n) % 11 {
                    0 => b'"',
                    1 | 2 => b' ',
                    _ => b'a' + (k % 26) as u8,
                });
            }
            block.extend_from_slice(if n % 5 == 0 { b"\r\n" } else { b"\n" });
        }
        block.extend_from_slice(b"last \"line\" without a newline");
        let mut index = Index::default();
        index.build(&block);
        let mut lines = index.lines();
        let mut start = 0;
        let mut seen = 0;
        while let Some(line) = lines.next(&block) {
            let newline = block[start..].iter().position(|&b| b == b'\n').map_or(block.len(), |i| start + i);
            let mut end = newline;
            while end > start && matches!(block[end - 1], b'\r' | b'\n') {
                end -= 1;
            }
            assert_eq!((line.start, line.end), (start, end), "line {seen}");
            let quotes: Vec<usize> = (start..newline).filter(|&i| block[i] == b'"').collect();
            assert_eq!(line.quote_count, quotes.len(), "line {seen}");
            assert_eq!(&line.quotes[..quotes.len().min(QUOTES)], &quotes[..quotes.len().min(QUOTES)], "line {seen}");
            for from in start..=end {
                let mut spaces = (from..end).filter(|&i| block[i] == b' ');
                assert_eq!(index.space(from, end), spaces.clone().next(), "line {seen}, from {from}");
                for n in 1..5 {
                    assert_eq!(index.nth_space(from, end, n), spaces.next(), "line {seen}, from {from}, space {n}");
                }
            }
            start = newline + 1;
            seen += 1;
        }
        assert_eq!(seen, 301);
    }

    #[test]
    fn the_vector_masks_equal_the_portable_ones() {
        let bytes: Vec<u8> = (0..64 * 50).map(|i: usize| b"\n \"ab\tc\r"[i * 31 % 8] ^ (i.is_multiple_of(3) as u8 * 0x80)).collect();
        let mut index = Index::default();
        index.build(&bytes);
        let (whole, _) = bytes.as_chunks::<64>();
        for (i, c) in whole.iter().enumerate() {
            let p = chunk_portable(c);
            let v = index.chunks[i];
            assert_eq!((v.newlines, v.spaces, v.quotes), (p.newlines, p.spaces, p.quotes), "chunk {i}");
        }
    }
}
