//! Ctrl-C (SIGINT) or SIGTERM during a trial ends its measured window early instead of
//! killing the engine: no more requests are sent, the outstanding ones get a short drain,
//! and the result reports what was measured, marked interrupted, so nothing measured is
//! lost. A second signal ends the process at once, unless it comes within `SAME_STOP_NS`
//! of the first: a terminal's Ctrl-C reaches the engine and its controller together, and
//! the controller passes it on too (for a signal sent to the controller alone), so one
//! Ctrl-C can arrive twice.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// CLOCK_MONOTONIC of the first signal, in ns.
static FIRST_NS: AtomicU64 = AtomicU64::new(0);

/// Longest drain of an interrupted trial: the user asked to stop, so requests still
/// outstanding after this are counted as cancelled.
pub const DRAIN_NS: u64 = 2_000_000_000;

/// Signals this soon after the first are the same stop delivered twice, not a second one.
pub const SAME_STOP_NS: u64 = 1_000_000_000;

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // clock_gettime is async-signal-safe (signal-safety(7)).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

extern "C" fn on_signal(_: libc::c_int) {
    let now = monotonic_ns();
    if !REQUESTED.swap(true, Ordering::SeqCst) {
        FIRST_NS.store(now, Ordering::SeqCst);
    } else if now.saturating_sub(FIRST_NS.load(Ordering::SeqCst)) > SAME_STOP_NS {
        // Async-signal-safe: a second signal means "now".
        unsafe { libc::_exit(130) };
    }
}

/// Catch SIGINT and SIGTERM for the rest of the process's life (for `run`).
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(signal, handler) };
    }
}

pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
