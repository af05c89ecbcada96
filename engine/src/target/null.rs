//! The null target does nothing, so a trial against it measures the engine's own floor.

use super::Target;
use crate::op::{Op, Outcome, Request};

pub struct NullTarget;

impl Target for NullTarget {
    fn supports(&self, _op: Op) -> bool {
        true
    }
    fn execute(&self, _request: &Request) -> Outcome {
        Ok(0)
    }
}
