//! Ctrl-C (SIGINT) or SIGTERM during a trial ends its measured window early instead of
//! killing the engine: no more requests are sent, the outstanding ones get a short drain,
//! and the result reports what was measured, marked interrupted, so nothing measured is
//! lost. A second signal ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Longest drain of an interrupted trial: the user asked to stop, so requests still
/// outstanding after this are counted as cancelled.
pub const DRAIN_NS: u64 = 2_000_000_000;

extern "C" fn on_signal(_: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // Async-signal-safe: the second signal means "now".
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
