//! The engine's clock: nanoseconds since the trial started, read twice per request.
//!
//! CLOCK_MONOTONIC through the vDSO costs about 40 ns here; where the kernel itself
//! keeps time with the TSC (clocksource `tsc`, which it only picks when the TSC is
//! invariant and synchronised across CPUs), the engine reads the TSC directly
//! (about 10 ns) and scales it with a rate measured against CLOCK_MONOTONIC at start.
//! Anywhere else it uses CLOCK_MONOTONIC.

/// CLOCK_MONOTONIC in ns.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct Clock {
    start_mono: u64,
    /// (TSC at the start, ns per tick as a 32.32 fixed-point number), when the TSC is used.
    tsc: Option<(u64, u64)>,
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
    /// Starts the clock; measuring the TSC's rate takes `calibrate_ms`.
    pub fn start(calibrate_ms: u64) -> Clock {
        #[cfg(target_arch = "x86_64")]
        if std::env::var_os("PEAKBENCH_NO_TSC").is_none() && kernel_uses_tsc() {
            let (t0, m0) = paired();
            std::thread::sleep(std::time::Duration::from_millis(calibrate_ms));
            let (t1, m1) = paired();
            if t1 > t0 && m1 > m0 {
                let per_tick = (((m1 - m0) as u128) << 32) / (t1 - t0) as u128;
                return Clock { start_mono: m1, tsc: Some((t1, per_tick as u64)) };
            }
        }
        Clock { start_mono: mono_ns(), tsc: None }
    }

    /// Nanoseconds since the start.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some((t0, per_tick)) = self.tsc {
            let ticks = rdtsc().saturating_sub(t0);
            return ((ticks as u128 * per_tick as u128) >> 32) as u64;
        }
        mono_ns().saturating_sub(self.start_mono)
    }

    pub fn source(&self) -> &'static str {
        if self.tsc.is_some() {
            "tsc"
        } else {
            "clock_monotonic"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_time_with_clock_monotonic() {
        let clock = Clock::start(20);
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
}
