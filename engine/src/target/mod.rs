//! Targets: the systems under test. Each maps the op vocabulary onto its own
//! protocol behind one small trait; the engine knows nothing else about them.

pub mod http;
pub mod idhash;
pub mod inflight;
pub mod nfs;
pub mod null;
pub mod posix;
pub mod readbuf;
pub mod smb;

use crate::op::{Op, Outcome, Reply, Request};
use crate::spec::TargetSpec;

/// The completion of a request started with `Target::start`: its outcome and the
/// retransmissions it took. Called exactly once, on any thread.
pub type Completion = Box<dyn FnOnce(Outcome, u32) + Send>;

pub trait Target: Send + Sync {
    /// Ops this target cannot perform are rejected before a trial starts.
    fn supports(&self, op: Op) -> bool;
    fn execute(&self, request: &Request) -> Outcome;
    /// Perform `request` as `execute` does and return what it observed, for validation (validate.rs):
    /// a target overrides this for the ops whose effect it can show (data read, attributes, names,
    /// link text, access, file-system figures); the others are `execute` itself.
    fn probe(&self, request: &Request) -> Result<Reply, String> {
        self.execute(request).map(Reply::Done)
    }
    /// Whether `start` may accept requests: then one sender keeps many in flight.
    fn pipelines(&self) -> bool {
        false
    }
    /// Start a request without waiting for it, or hand `done` back if this one must
    /// go through the blocking `execute`. A started request may wait for `flush`.
    fn start(&self, _request: &Request, done: Completion) -> Result<(), Completion> {
        Err(done)
    }
    /// Send every started request (one system call for a batch of them).
    fn flush(&self) {}
    /// Whether started requests complete only inside `poll`, on the thread that calls it (an
    /// event loop the leading sender drives), rather than on the target's own threads.
    fn completes_in_poll(&self) -> bool {
        false
    }
    /// Run the completions that are ready, waiting up to `timeout` for the first of them.
    fn poll(&self, _timeout: std::time::Duration) {}
    /// How late the leading sender may send a request (latency counts from its due time), so that
    /// one wake-up and one write send it with those due meanwhile: zero, or a small fraction of
    /// the latency being measured, for a target that completes in `poll`.
    fn send_slack(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// Called once on each sender thread before its first request.
    fn enter_sender_thread(&self) {}
    /// Retransmissions made by this thread's last `execute` (protocol targets only).
    fn take_retransmissions(&self) -> u32 {
        0
    }
    /// Fields the target adds to the trial's result about its own transport (so far only
    /// the NFS target's receive moderation: how long replies were held, since latencies carry it).
    fn result_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }

    /// The target's file store, to build and restore file sets; None for a target that holds no files.
    fn store(&self) -> Option<&dyn FileStore> {
        None
    }
    fn store_mut(&mut self) -> Option<&mut dyn FileStore> {
        None
    }
}

/// Building and restoring file sets, outside any measurement: what a target that holds files
/// offers besides its ops.
pub trait FileStore {
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
        TargetSpec::Nfs(n) => Box::new(nfs::Nfs::open(n)?),
        TargetSpec::Smb(s) => Box::new(smb::Smb::open(s)?),
        TargetSpec::Http { url, docroot, timeout_s, getattr, writable } => {
            Box::new(http::Http::open(url, docroot.as_deref(), *timeout_s, *getattr, *writable)?)
        }
    })
}

/// Exercise every operation on the target (validate.rs); the result lists each check.
pub fn validate(spec: &TargetSpec) -> anyhow::Result<serde_json::Value> {
    Ok(match spec {
        TargetSpec::Posix { path, .. } => crate::validate::validate(&posix::Posix::open(path)?, path),
        TargetSpec::Nfs(n) => crate::validate::validate(&nfs::Nfs::open(n)?, &nfs::Nfs::url_of(n)),
        TargetSpec::Smb(s) => crate::validate::validate(&smb::Smb::open(s)?, &smb::Smb::url_of(s)),
        TargetSpec::Null => anyhow::bail!("null:// does nothing, so there is nothing to validate"),
        TargetSpec::Http { .. } => anyhow::bail!("validate covers file-service targets (a directory, nfs://); an http:// server is checked by its trials"),
    })
}
