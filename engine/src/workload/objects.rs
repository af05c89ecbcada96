//! A weighted object set: O(log n) weighted pick, weight change and append.
//! Like Fstress's "sparse heap", objects stay at fixed indices and a deleted
//! object is simply weight 0. It is a Fenwick tree over integer weights, so
//! picks stay exact after any number of inserts and deletes (no float drift),
//! at 8 bytes per object.

use rand::Rng;

pub struct WeightedSet {
    tree: Vec<u64>, // tree[i] covers (i - lowbit(i), i], 1-based
    total: u64,
    /// Some(w) while every object weighs exactly w > 0: then the object whose interval
    /// holds a draw is draw / w, the same answer as the tree walk, in O(1).
    uniform: Option<u64>,
}

/// Floating weights are scaled to integers: the largest maps near 2^40, so a
/// set of 2^23 objects cannot overflow and relative resolution is ~1e-12.
pub const WEIGHT_SCALE: f64 = (1u64 << 40) as f64;

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl WeightedSet {
    pub fn from_weights(weights: impl IntoIterator<Item = u64>) -> WeightedSet {
        let mut tree = vec![0u64];
        tree.extend(weights);
        let first = tree.get(1).copied().filter(|&w| w > 0);
        let uniform = first.filter(|&w| tree[1..].iter().all(|&x| x == w));
        // Linear-time build: push each node's sum to its parent.
        for i in 1..tree.len() {
            let parent = i + lowbit(i);
            if parent < tree.len() {
                tree[parent] += tree[i];
            }
        }
        let mut set = WeightedSet { tree, total: 0, uniform };
        set.total = set.prefix(set.len());
        set
    }

    pub fn len(&self) -> usize {
        self.tree.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0;
        while i > 0 {
            s += self.tree[i];
            i -= lowbit(i);
        }
        s
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn weight(&self, index: usize) -> u64 {
        self.prefix(index + 1) - self.prefix(index)
    }

    pub fn set(&mut self, index: usize, weight: u64) {
        let old = self.weight(index);
        if old != weight {
            self.uniform = None;
        }
        self.total = self.total - old + weight;
        let mut i = index + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i] - old + weight;
            i += lowbit(i);
        }
    }

    pub fn remove(&mut self, index: usize) {
        self.set(index, 0);
    }

    /// Append an object; returns its index.
    pub fn push(&mut self, weight: u64) -> usize {
        let i = self.tree.len();
        self.uniform = match self.uniform {
            Some(w) if w == weight => Some(w),
            None if i == 1 && weight > 0 => Some(weight),
            _ => None,
        };
        // Node i covers (i - lowbit(i), i]: its own weight plus the children below it.
        let covered = self.prefix(i - 1) - self.prefix(i - lowbit(i));
        self.tree.push(weight + covered);
        self.total += weight;
        i - 1
    }

    /// The index whose cumulative weight interval contains a uniform draw; None if all weights are 0.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<usize> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let mut target = rng.random_range(0..total);
        if let Some(w) = self.uniform {
            // Uniform popularity weighs every object WEIGHT_SCALE, a power of two: a shift, not a
            // 64-bit division per pick.
            let index = if w.is_power_of_two() { target >> w.trailing_zeros() } else { target / w };
            return Some(index as usize);
        }
        let mut pos = 0;
        let mut step = (self.len() + 1).next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next < self.tree.len() && self.tree[next] <= target {
                target -= self.tree[next];
                pos = next;
            }
            step >>= 1;
        }
        Some(pos) // 0-based index of node pos + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn shares(set: &WeightedSet, n: usize) -> Vec<f64> {
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let mut counts = vec![0usize; set.len()];
        for _ in 0..n {
            counts[set.pick(&mut rng).unwrap()] += 1;
        }
        counts.iter().map(|&c| c as f64 / n as f64).collect()
    }

    #[test]
    fn picks_follow_weights_after_inserts_and_deletes() {
        let mut set = WeightedSet::from_weights([1, 2, 3, 4, 5, 6, 7]);
        set.remove(3); // weight 4 gone
        let added = set.push(10);
        set.set(0, 0);
        set.set(6, 1);
        let weights: Vec<u64> = (0..set.len()).map(|i| set.weight(i)).collect();
        assert_eq!(weights, vec![0, 2, 3, 0, 5, 6, 1, 10]);
        assert_eq!(added, 7);
        let total: u64 = weights.iter().sum();
        assert_eq!(set.total(), total);
        for (i, share) in shares(&set, 1_000_000).iter().enumerate() {
            let want = weights[i] as f64 / total as f64;
            assert!((share - want).abs() < 0.002, "object {i}: {share} vs {want}");
            if weights[i] == 0 {
                assert_eq!(*share, 0.0, "deleted object {i} was picked");
            }
        }
    }

    #[test]
    fn pushes_match_a_bulk_build() {
        let weights: Vec<u64> = (0..1000).map(|i| (i * 7919 % 97) as u64).collect();
        let bulk = WeightedSet::from_weights(weights.iter().copied());
        let mut grown = WeightedSet::from_weights([]);
        for &w in &weights {
            grown.push(w);
        }
        assert_eq!(bulk.tree, grown.tree);
        assert_eq!(grown.total(), weights.iter().sum::<u64>());
        assert_eq!(bulk.total(), weights.iter().sum::<u64>());
    }

    #[test]
    fn the_uniform_shortcut_picks_what_the_tree_walk_picks() {
        let mut a = WeightedSet::from_weights([5; 1000]);
        assert_eq!(a.uniform, Some(5));
        let mut b = WeightedSet::from_weights([5; 1000]);
        b.uniform = None; // always walk the tree
        let (mut ra, mut rb) = (Pcg64Mcg::seed_from_u64(4), Pcg64Mcg::seed_from_u64(4));
        for _ in 0..100_000 {
            assert_eq!(a.pick(&mut ra), b.pick(&mut rb));
        }
        a.push(5);
        b.push(5);
        assert_eq!(a.uniform, Some(5));
        for _ in 0..10_000 {
            assert_eq!(a.pick(&mut ra), b.pick(&mut rb));
        }
        a.remove(17);
        b.remove(17);
        assert_eq!(a.uniform, None);
        for _ in 0..10_000 {
            assert_ne!(a.pick(&mut ra), Some(17));
        }
        let mut grown = WeightedSet::from_weights([]);
        grown.push(3);
        grown.push(3);
        assert_eq!(grown.uniform, Some(3));
        grown.push(4);
        assert_eq!(grown.uniform, None);
    }

    #[test]
    fn empty_or_all_deleted_picks_nothing() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(WeightedSet::from_weights([]).pick(&mut rng), None);
        let mut set = WeightedSet::from_weights([5]);
        set.remove(0);
        assert_eq!(set.pick(&mut rng), None);
    }
}
