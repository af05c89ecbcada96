//! A cap on the requests a blocking caller may have in flight (`max_outstanding`), shared by the
//! pipelined targets (NFS, SMB): a caller waits for a permit, which it gives back when dropped.

use std::sync::{Condvar, Mutex};

pub struct InflightCap {
    cap: Option<usize>,
    inflight: Mutex<usize>,
    freed: Condvar,
}

impl InflightCap {
    pub fn new(cap: Option<usize>) -> InflightCap {
        InflightCap { cap, inflight: Mutex::new(0), freed: Condvar::new() }
    }

    /// Wait until fewer than `cap` requests are in flight and count one more; None without a cap.
    pub fn acquire(&self) -> Option<Permit<'_>> {
        let cap = self.cap?;
        let mut n = self.inflight.lock().expect("inflight lock");
        while *n >= cap {
            n = self.freed.wait(n).expect("inflight lock");
        }
        *n += 1;
        Some(Permit(self))
    }
}

pub struct Permit<'a>(&'a InflightCap);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.inflight.lock().expect("inflight lock") -= 1;
        self.0.freed.notify_one();
    }
}
