//! Latency counts recorded on the hot path: HdrHistogram's own bucket layout for
//! `record::new_histogram`'s bounds (1 ns to 1 hour, 3 significant digits), where a record is
//! a leading-zero count, a shift and an add. hdrhistogram's `saturating_record` also keeps a
//! total, a minimum and a maximum and checks its bounds per value (about 60 instructions; this
//! is about 12). `histogram()` turns the counts into the same `Histogram` recording every value
//! there would have made: equal counts per bucket, so equal summaries and encoding.

use crate::record::new_histogram;
use hdrhistogram::Histogram;

/// Sub-buckets per bucket: 2^11, the smallest power of two with 2 * 10^3 single-unit values.
const SUB_BUCKET_BITS: u32 = 11;
const HALF_BITS: u32 = SUB_BUCKET_BITS - 1;
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_BITS) - 1;
/// The highest trackable value (an hour in ns). HdrHistogram's buckets reach past it, to
/// COVERED; `saturating_record` counts a value beyond that as this one.
pub const HIGHEST: u64 = 3_600_000_000_000;
/// Buckets (each twice the last's range) to cover HIGHEST, as HdrHistogram sizes them.
const BUCKETS: u32 = {
    let mut b = 1;
    while (1u64 << SUB_BUCKET_BITS) << (b - 1) <= HIGHEST {
        b += 1;
    }
    b
};
/// The highest value the counts hold.
const COVERED: u64 = ((1u64 << SUB_BUCKET_BITS) << (BUCKETS - 1)) - 1;
const COUNTS: usize = ((BUCKETS + 1) as usize) << HALF_BITS;

pub struct LatencyHist {
    counts: Box<[u64]>,
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist { counts: vec![0; COUNTS].into_boxed_slice() }
    }
}

/// HdrHistogram's counts index of `value` (1 ≤ value ≤ COVERED, unit 1 ns).
#[inline]
fn index_of(value: u64) -> usize {
    let bucket = 64 - SUB_BUCKET_BITS - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = (value >> bucket) as usize;
    ((bucket as usize + 1) << HALF_BITS) + sub_bucket - (1 << HALF_BITS)
}

/// The lowest value counted at `index`: the inverse of `index_of`.
fn value_of(index: usize) -> u64 {
    let bucket = (index >> HALF_BITS) as i64 - 1;
    let sub_bucket = (index & ((1 << HALF_BITS) - 1)) as u64 + (1 << HALF_BITS);
    if bucket < 0 {
        sub_bucket - (1 << HALF_BITS)
    } else {
        sub_bucket << bucket
    }
}

impl LatencyHist {
    /// Count one value in ns as `saturating_record(ns.max(1))` would.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let v = if ns > COVERED { HIGHEST } else { ns.max(1) };
        self.counts[index_of(v)] += 1;
    }

    pub fn add(&mut self, other: &LatencyHist) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
    }

    pub fn histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, &n)| n > 0) {
            h.record_n(value_of(i), n).expect("a value within the histogram's bounds");
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::encode;
    use rand::{Rng, SeedableRng};

    #[test]
    fn gives_the_histogram_that_recording_each_value_gives() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut fast = LatencyHist::default();
        let mut hdr = new_histogram();
        // Every magnitude from 1 ns to past an hour, bucket edges and the clamp included.
        let mut values: Vec<u64> = (0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1]).collect();
        values.extend((0..20_000).map(|_| {
            let magnitude = rng.random_range(1..43);
            rng.random_range(1..=1u64 << magnitude)
        }));
        values.extend([0, 2047, 2048, 2049, HIGHEST - 1, HIGHEST, HIGHEST + 1, COVERED, COVERED + 1, u64::MAX]);
        for &v in &values {
            fast.record(v);
            hdr.saturating_record(v.max(1));
        }
        let h = fast.histogram();
        assert_eq!(h.len(), hdr.len());
        assert_eq!((h.min(), h.max(), h.mean()), (hdr.min(), hdr.max(), hdr.mean()));
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(h.value_at_quantile(q), hdr.value_at_quantile(q), "quantile {q}");
        }
        assert_eq!(encode(&h), encode(&hdr));
        assert_eq!(fast.counts.len(), hdr.distinct_values(), "the same bucket layout");
    }

    #[test]
    fn adds_up_the_counts_of_another() {
        let (mut a, mut b) = (LatencyHist::default(), LatencyHist::default());
        a.record(5);
        b.record(5);
        b.record(7_000_000);
        a.add(&b);
        let h = a.histogram();
        assert_eq!((h.len(), h.count_at(5), h.count_at(7_000_000)), (3, 2, 1));
    }
}
