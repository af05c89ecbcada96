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
