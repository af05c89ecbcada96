//! Targets: the systems under test. Each maps the op vocabulary onto its own
//! protocol behind one small trait; the engine knows nothing else about them.

pub mod null;
pub mod posix;

use crate::spec::TargetSpec;
use crate::workload::mix::Op;

/// One operation, with paths relative to the file-set root.
#[derive(Debug, Clone)]
pub enum Request {
    Null,
    Getattr { path: String },
    Setattr { path: String },
    Lookup { dir: String, name: String },
    Access { path: String },
    Readlink { path: String },
    /// A logical read or write of `len` bytes at `offset`, in transfers of at most `xfer` bytes.
    Read { path: String, offset: u64, len: u64, xfer: u64 },
    Write { path: String, offset: u64, len: u64, xfer: u64 },
    Create { path: String },
    Mkdir { path: String },
    Symlink { path: String, points_to: String },
    Remove { path: String },
    Rmdir { path: String },
    Rename { from: String, to: String },
    Link { from: String, to: String },
    Readdir { path: String, plus: bool },
    Fsstat,
    Fsinfo,
    Pathconf,
    Commit { path: String },
}

/// Bytes moved, or the kind of error (an errno name such as "ENOENT").
pub type Outcome = Result<u64, String>;

pub trait Target: Send + Sync {
    /// Ops this target cannot perform are rejected before a trial starts.
    fn supports(&self, op: Op) -> bool;
    fn execute(&self, request: &Request) -> Outcome;

    // File-set building and restoring, outside any measurement.
    /// Make the file set's root (named `id`) and use it for all later paths.
    fn enter_fileset(&mut self, id: &str, create: bool) -> anyhow::Result<()>;
    /// Whether the target directory holds anything at all.
    fn is_empty(&self) -> anyhow::Result<bool>;
    fn read_meta(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>>;
    /// Atomically replace a metadata file next to the file sets.
    fn write_meta(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()>;
    fn ensure_dir(&self, path: &str) -> anyhow::Result<()>;
    /// Create or complete a file so it has exactly `size` bytes of content.
    fn ensure_file(&self, path: &str, size: u64, content: &[u8]) -> anyhow::Result<()>;
    fn ensure_symlink(&self, path: &str, points_to: &str) -> anyhow::Result<()>;
    fn truncate(&self, path: &str, size: u64) -> anyhow::Result<()>;
}

pub fn open(spec: &TargetSpec) -> anyhow::Result<Box<dyn Target>> {
    Ok(match spec {
        TargetSpec::Posix { path, fd_cache } => Box::new(posix::Posix::open_with(path, *fd_cache)?),
        TargetSpec::Null => Box::new(null::NullTarget),
    })
}
