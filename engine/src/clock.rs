//! The engine's clock: nanoseconds since the trial started, read twice per request.
//!
//! CLOCK_MONOTONIC through the vDSO costs about 40 ns here; where the kernel itself
//! keeps time with the TSC (clocksource `tsc`, which it only picks when the TSC is
//! invariant and synchronised across CPUs), the engine reads the TSC directly
//! (about 10 ns) and scales it with a rate measured against CLOCK_MONOTONIC at start.
//! Anywhere else it uses CLOCK_MONOTONIC.

/// Wake-ups of the calling thread land within microseconds of their time instead of
/// the default 50 µs timer slack: for threads whose sleeps are part of what is measured.
pub fn tight_timer_slack() {
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
}

/// CLOCK_MONOTONIC in ns.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct Clock {
    /// CLOCK_MONOTONIC at time zero.
    zero_mono: u64,
    /// (TSC at a reading, ns since zero at that reading, ns per tick as a 32.32
    /// fixed-point number), when the TSC is used.
    tsc: Option<(u64, u64, u64)>,
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
fn kernel_uses_tsc() -> bool {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").is_ok_and(|s| s.trim() == "tsc")
}

/// A (TSC, CLOCK_MONOTONIC) pair read as close together as the machine allows.
#[cfg(target_arch = "x86_64")]
fn paired() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..16 {
        let a = mono_ns();
        let t = rdtsc();
        let b = mono_ns();
        if b - a < best.2 {
            best = (t, a + (b - a) / 2, b - a);
        }
    }
    (best.0, best.1)
}

impl Clock {
    /// Measures the TSC's rate (taking `calibrate_ms`), so that the trial's time zero,
    /// given to `zero_at` once set-up is done, costs nothing more.
    pub fn calibrate(calibrate_ms: u64) -> Calibration {
        #[cfg(target_arch = "x86_64")]
        if std::env::var_os("PEAKBENCH_NO_TSC").is_none() && kernel_uses_tsc() {
            let (t0, m0) = paired();
            std::thread::sleep(std::time::Duration::from_millis(calibrate_ms));
            let (t1, m1) = paired();
            if t1 > t0 && m1 > m0 {
                return Calibration { per_tick: Some(((((m1 - m0) as u128) << 32) / (t1 - t0) as u128) as u64) };
            }
        }
        Calibration { per_tick: None }
    }

    /// Nanoseconds since the start.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some((t0, ns0, per_tick)) = self.tsc {
            let ticks = rdtsc().saturating_sub(t0);
            return ns0 + ((ticks as u128 * per_tick as u128) >> 32) as u64;
        }
        mono_ns().saturating_sub(self.zero_mono)
    }

    pub fn source(&self) -> &'static str {
        if self.tsc.is_some() {
            "tsc"
        } else {
            "clock_monotonic"
        }
    }
}

/// The TSC's measured rate, if the engine reads the TSC.
pub struct Calibration {
    per_tick: Option<u64>,
}

impl Calibration {
    /// The clock whose zero is `zero` (an instant already passed: the trial's start).
    pub fn zero_at(&self, zero: std::time::Instant) -> Clock {
        let zero_mono = mono_ns().saturating_sub(zero.elapsed().as_nanos() as u64);
        #[cfg(target_arch = "x86_64")]
        if let Some(per_tick) = self.per_tick {
            let (t, m) = paired();
            return Clock { zero_mono, tsc: Some((t, m.saturating_sub(zero_mono), per_tick)) };
        }
        Clock { zero_mono, tsc: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_time_with_clock_monotonic() {
        let clock = Clock::calibrate(20).zero_at(std::time::Instant::now());
        let (c0, m0) = (clock.now_ns(), mono_ns());
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (c1, m1) = (clock.now_ns(), mono_ns());
        let (dc, dm) = ((c1 - c0) as f64, (m1 - m0) as f64);
        // Within 0.1% (and the two reads' spacing) over 200 ms.
        assert!((dc - dm).abs() < dm * 1e-3 + 20_000.0, "{} clock: {dc} ns vs CLOCK_MONOTONIC {dm} ns", clock.source());
        let mut last = clock.now_ns();
        for _ in 0..100_000 {
            let t = clock.now_ns();
            assert!(t >= last, "went backwards");
            last = t;
        }
    }

    #[test]
    fn counts_from_a_zero_in_the_past() {
        let zero = std::time::Instant::now() - std::time::Duration::from_millis(300);
        let clock = Clock::calibrate(20).zero_at(zero);
        let (c, e) = (clock.now_ns() as f64, zero.elapsed().as_nanos() as f64);
        assert!((c - e).abs() < 100_000.0, "{} clock: {c} ns since zero, Instant says {e} ns", clock.source());
    }
}
