//! A hasher for tables keyed by our own identifiers (RPC XIDs, SMB2 message IDs, the
//! paths of our own file sets): nobody chooses them against us, so SipHash's defence
//! against chosen keys buys nothing, and it cost hundreds of instructions per op.

use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct IdHasher(u64);

/// What a table keyed by our identifiers is built with.
pub type IdHash = BuildHasherDefault<IdHasher>;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(self.0 ^ u64::from(*b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: spreads consecutive IDs over the table's high and low bits.
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u32(&mut self, id: u32) {
        self.write_u64(u64::from(id));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
