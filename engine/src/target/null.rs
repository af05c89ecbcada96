//! The null target does nothing, so a trial against it measures the engine's own floor.

use super::{Outcome, Request, Target};
use crate::workload::mix::Op;

pub struct NullTarget;

impl Target for NullTarget {
    fn supports(&self, _op: Op) -> bool {
        true
    }
    fn execute(&self, _request: &Request) -> Outcome {
        Ok(0)
    }
    fn enter_fileset(&mut self, _id: &str, _create: bool) -> anyhow::Result<()> {
        Ok(())
    }
    fn is_empty(&self) -> anyhow::Result<bool> {
        Ok(true)
    }
    fn read_meta(&self, _name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn write_meta(&self, _name: &str, _bytes: &[u8]) -> anyhow::Result<()> {
        Ok(())
    }
    fn ensure_dir(&self, _path: &str) -> anyhow::Result<()> {
        Ok(())
    }
    fn ensure_file(&self, _path: &str, _size: u64, _content: &[u8]) -> anyhow::Result<()> {
        Ok(())
    }
    fn ensure_symlink(&self, _path: &str, _points_to: &str) -> anyhow::Result<()> {
        Ok(())
    }
    fn truncate(&self, _path: &str, _size: u64) -> anyhow::Result<()> {
        Ok(())
    }
}
