//! A synchronized start: the schedule's time zero at an agreed wall-clock instant.
//!
//! Load clients on several hosts get the same `start_at_unix_s` (shifted by each
//! client's measured clock offset by the controller). Each engine does its set-up,
//! then waits on the monotonic clock until its wall clock reads that instant. An
//! engine that is ready late still anchors its schedule at the instant: the
//! requests it missed are overdue, so the lag shows in its schedule-lag figures
//! and `start_late_ms` rather than shifting its window against the others'.

use crate::spec::MAX_START_AHEAD_S;
use anyhow::bail;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Below this the wait spins: a timer wake-up can be a few hundred µs late.
const SPIN_S: f64 = 0.002;

/// How far `start_at` is from `now` (both seconds since the epoch): ahead (> 0) or late (< 0).
pub fn offset_s(start_at: f64, now: f64) -> anyhow::Result<f64> {
    let ahead = start_at - now;
    if ahead > MAX_START_AHEAD_S {
        bail!("start_at_unix_s is {ahead:.0} s in the future (more than {MAX_START_AHEAD_S:.0} s): is this host's clock wrong?");
    }
    Ok(ahead)
}

pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The schedule's time zero, as an Instant, and how late (ms, ≥ 0) the engine was for it.
/// Without `start_at`, time zero is now.
pub fn anchor(start_at: Option<f64>) -> anyhow::Result<(Instant, f64)> {
    let Some(at) = start_at else { return Ok((Instant::now(), 0.0)) };
    let (now_i, now_s) = (Instant::now(), unix_now());
    let ahead = offset_s(at, now_s)?;
    if ahead <= 0.0 {
        let late = Duration::from_secs_f64(-ahead);
        return Ok((now_i.checked_sub(late).unwrap_or(now_i), -ahead * 1e3));
    }
    let zero = now_i + Duration::from_secs_f64(ahead);
    loop {
        let now = Instant::now();
        if now >= zero {
            break;
        }
        let left = (zero - now).as_secs_f64();
        if left > SPIN_S {
            std::thread::sleep(Duration::from_secs_f64(left - SPIN_S / 2.0));
        } else {
            std::hint::spin_loop();
        }
    }
    Ok((zero, 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ahead_and_late() {
        assert_eq!(offset_s(1000.5, 1000.0).unwrap(), 0.5);
        assert_eq!(offset_s(999.75, 1000.0).unwrap(), -0.25);
        assert!(offset_s(1000.0 + MAX_START_AHEAD_S + 1.0, 1000.0).is_err());
    }

    #[test]
    fn waits_for_the_instant() {
        let before = Instant::now();
        let (zero, late) = anchor(Some(unix_now() + 0.05)).unwrap();
        assert_eq!(late, 0.0);
        let waited = zero.duration_since(before).as_secs_f64();
        assert!((0.04..0.07).contains(&waited), "waited {waited}");
        assert!(Instant::now() >= zero);
    }

    #[test]
    fn a_late_engine_anchors_in_the_past() {
        let (zero, late) = anchor(Some(unix_now() - 0.2)).unwrap();
        assert!((199.0..260.0).contains(&late), "late {late}");
        assert!(zero.elapsed().as_secs_f64() >= 0.19);
    }

    #[test]
    fn no_instant_starts_now() {
        let (zero, late) = anchor(None).unwrap();
        assert_eq!(late, 0.0);
        assert!(zero.elapsed().as_secs_f64() < 0.01);
    }
}
