//! When each request is due. No clocks here: a schedule maps the request number
//! to its intended send time; the dispatcher compares that with the elapsed time,
//! so pacing is tested exactly without sleeping.

use crate::spec::Arrivals;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Intended send time of request n (0-based), in nanoseconds from the start.
/// Calls come in increasing n, which lets Poisson arrivals accumulate.
pub trait Schedule {
    fn due_ns(&mut self, n: u64) -> u64;

    /// The first request from `n` on that is due at or after `end_ns`: where a generator that
    /// fell behind resumes once what it never sent before `end_ns` is counted. One request at
    /// a time unless the schedule knows better.
    fn first_due_at_or_after(&mut self, n: u64, end_ns: u64) -> u64 {
        let mut m = n;
        while self.due_ns(m) < end_ns {
            m += 1;
        }
        m
    }
}

/// Fstress's metronome: request n is due at n / rate.
pub struct Uniform {
    /// 1e9 / rate: a multiplication per request, not a division.
    gap_ns: f64,
}

impl Uniform {
    pub fn new(rate: f64) -> Uniform {
        Uniform { gap_ns: 1e9 / rate }
    }
}

impl Schedule for Uniform {
    fn due_ns(&mut self, n: u64) -> u64 {
        // Rounded to the nearest ns (half up); `as` truncates, and the value is never negative.
        (n as f64 * self.gap_ns + 0.5) as u64
    }

    /// Computed, then corrected by a step or two for rounding: a trial offered far more
    /// than it sends (flat out under a cap) skips millions of requests at its end.
    fn first_due_at_or_after(&mut self, n: u64, end_ns: u64) -> u64 {
        let mut m = ((end_ns as f64 / self.gap_ns) as u64).max(n);
        while m > n && self.due_ns(m - 1) >= end_ns {
            m -= 1;
        }
        while self.due_ns(m) < end_ns {
            m += 1;
        }
        m
    }
}

/// Poisson arrivals: exponential gaps with mean 1 / rate, from a seeded stream.
pub struct Poisson {
    rate: f64,
    rng: Pcg64Mcg,
    next_n: u64,
    at_s: f64,
}

impl Schedule for Poisson {
    fn due_ns(&mut self, n: u64) -> u64 {
        assert!(n + 1 >= self.next_n, "Poisson schedule is queried in order");
        while self.next_n <= n {
            if self.next_n > 0 {
                self.at_s += -(1.0 - self.rng.random::<f64>()).ln() / self.rate;
            }
            self.next_n += 1;
        }
        (self.at_s * 1e9).round() as u64
    }
}

/// A replayed log's own pace: request n is due at its offset in the log (looped with the
/// log's period), divided by the speed factor.
pub struct Replayed {
    pub offsets_ns: Vec<u64>,
    pub period_ns: u64,
    pub speed: f64,
}

impl Schedule for Replayed {
    fn due_ns(&mut self, n: u64) -> u64 {
        let len = self.offsets_ns.len() as u64;
        let at = self.offsets_ns[(n % len) as usize] as f64 + (n / len) as f64 * self.period_ns as f64;
        (at / self.speed).round() as u64
    }
}

pub fn schedule(arrivals: Arrivals, rate: f64, seed: u64) -> Box<dyn Schedule + Send> {
    match arrivals {
        Arrivals::Uniform => Box::new(Uniform::new(rate)),
        Arrivals::Poisson => Box::new(Poisson { rate, rng: Pcg64Mcg::seed_from_u64(seed ^ 0x706f_6973), next_n: 0, at_s: 0.0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metronome_is_exact() {
        let mut s = Uniform::new(1000.0);
        assert_eq!(s.due_ns(0), 0);
        assert_eq!(s.due_ns(1), 1_000_000);
        assert_eq!(s.due_ns(2500), 2_500_000_000);
        let mut odd = Uniform::new(3.0);
        assert_eq!(odd.due_ns(1), 333_333_333);
        assert_eq!(odd.due_ns(3), 1_000_000_000);
        // Within half a ns of the exact n / rate, far out and at awkward rates.
        for rate in [7.0, 333.0, 123_456.7, 1_953_125.0, 49_999_999.0] {
            let mut s = Uniform::new(rate);
            for n in [1u64, 999, 1_000_003, 123_456_789] {
                let exact = n as f64 * 1e9 / rate;
                assert!((s.due_ns(n) as f64 - exact).abs() <= 0.5 + exact * 1e-15, "rate {rate} n {n}");
            }
        }
    }

    #[test]
    fn metronome_finds_the_first_request_due_after_a_time_as_counting_would() {
        for rate in [3.0, 1000.0, 123_456.7, 400_000.0, 49_999_999.0] {
            for (n, end_ns) in [(0u64, 0u64), (0, 1), (5, 3_000_000_000), (17, 4_000_000_001), (1_000, 999), (3, 333_333_333)] {
                let mut s = Uniform::new(rate);
                let mut counted = n;
                while s.due_ns(counted) < end_ns {
                    counted += 1;
                }
                assert_eq!(s.first_due_at_or_after(n, end_ns), counted, "rate {rate} n {n} end {end_ns}");
            }
        }
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_spread() {
        let mut s = schedule(Arrivals::Poisson, 500.0, 9);
        let n = 200_000u64;
        let mut gaps = Vec::with_capacity(n as usize);
        let mut prev = s.due_ns(0);
        for i in 1..=n {
            let d = s.due_ns(i);
            gaps.push((d - prev) as f64 / 1e9);
            prev = d;
        }
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 0.002).abs() < 0.002 * 0.01, "mean gap {mean}");
        // exponential: coefficient of variation 1
        assert!((var.sqrt() / mean - 1.0).abs() < 0.02, "cv {}", var.sqrt() / mean);
    }

    #[test]
    fn replayed_times_loop_and_scale() {
        let mut s = Replayed { offsets_ns: vec![0, 500, 2000], period_ns: 3000, speed: 2.0 };
        let due: Vec<u64> = (0..6).map(|n| s.due_ns(n)).collect();
        assert_eq!(due, vec![0, 250, 1000, 1500, 1750, 2500]);
    }

    #[test]
    fn poisson_is_reproducible_and_requery_is_stable() {
        let mut a = schedule(Arrivals::Poisson, 100.0, 1);
        let mut b = schedule(Arrivals::Poisson, 100.0, 1);
        let xs: Vec<u64> = (0..1000).map(|i| a.due_ns(i)).collect();
        let ys: Vec<u64> = (0..1000).map(|i| b.due_ns(i)).collect();
        assert_eq!(xs, ys);
        assert_eq!(a.due_ns(999), xs[999]); // asking again for the same n does not advance
    }
}
