//! The deterministic content of the files peakbench writes: a function of the byte offset that
//! looks incompressible, so neither a compressing server nor a deduplicating one is flattered.
//! prepare, restore and every target's writes take their bytes from here.

/// Fill `buf` with the content that belongs at byte `offset`.
pub fn fill(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = (offset + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        *b = (x >> 56) as u8;
    }
}

/// One MiB of content, which files are built from by repeating it; `seed` picks where it starts.
pub fn block(seed: u64) -> Vec<u8> {
    let mut block = vec![0u8; 1 << 20];
    fill(&mut block, seed.wrapping_mul(4099));
    block
}

/// What a target's writes send: `block(0)`, built on the first write, since a MiB costs about four
/// million instructions that a trial without writes need not pay.
#[derive(Default)]
pub struct Writes(std::sync::OnceLock<Vec<u8>>);

impl Writes {
    /// The most bytes one `at` returns: half the block, so that any offset has that much after it.
    pub const MAX: usize = 1 << 19;

    /// The bytes a write of `n` (at most MAX) at `offset` sends: a function of the offset.
    pub fn at(&self, offset: u64, n: usize) -> &[u8] {
        let block = self.0.get_or_init(|| block(0));
        let start = (offset % Self::MAX as u64) as usize;
        &block[start..start + n.min(Self::MAX)]
    }
}
