//! The lead: whoever holds it owns the schedule and the generator (`Sched`). A
//! spin-free try-lock: nobody ever waits for it; a thread that fails to take it
//! parks or records elsewhere.

use super::sched::Sched;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering::*};

pub struct Lead {
    taken: AtomicBool,
    sched: UnsafeCell<Sched>,
}

// SAFETY: `sched` is only reached through a LeadGuard, and `taken` admits one guard at a time.
unsafe impl Sync for Lead {}

pub struct LeadGuard<'a>(&'a Lead);

impl Lead {
    pub fn new(sched: Sched) -> Lead {
        Lead { taken: AtomicBool::new(false), sched: UnsafeCell::new(sched) }
    }
    pub fn try_take(&self) -> Option<LeadGuard<'_>> {
        if self.taken.load(Relaxed) {
            return None;
        }
        self.taken.compare_exchange(false, true, Acquire, Relaxed).ok().map(|_| LeadGuard(self))
    }
    pub fn is_taken(&self) -> bool {
        self.taken.load(Relaxed)
    }
}

impl std::ops::Deref for LeadGuard<'_> {
    type Target = Sched;
    fn deref(&self) -> &Sched {
        // SAFETY: this guard is the only one (see Lead).
        unsafe { &*self.0.sched.get() }
    }
}

impl std::ops::DerefMut for LeadGuard<'_> {
    fn deref_mut(&mut self) -> &mut Sched {
        // SAFETY: this guard is the only one (see Lead).
        unsafe { &mut *self.0.sched.get() }
    }
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        self.0.taken.store(false, Release);
    }
}
