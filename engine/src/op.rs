//! The operation vocabulary shared by the spec, the workload and the targets: the op
//! names (NFSv3 procedure names), the request an op becomes, and its outcome. A leaf
//! module: it depends on nothing else in the engine.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Null,
    Getattr,
    Setattr,
    Lookup,
    Access,
    Readlink,
    Read,
    Write,
    Create,
    Mkdir,
    Symlink,
    Remove,
    Rmdir,
    Rename,
    Link,
    Readdir,
    Readdirplus,
    Fsstat,
    Fsinfo,
    Pathconf,
    Commit,
    /// A byte-range lock taken and released on an open file (SMB2 LOCK; SPECsfs2008 CIFS LOCKING_ANDX).
    Lock,
    /// Open a handle on a file and keep it (SMB2 CREATE; CIFS NT_CREATE_ANDX). Only a Markov
    /// workload issues it, and the ops on that handle follow it until its `close`.
    Open,
    /// Close a handle `open` made (SMB2 CLOSE).
    Close,
    /// Query an open handle's attributes (SMB2 QUERY_INFO on the handle; CIFS TRANS2_QUERY_FILE_INFORMATION).
    Fgetattr,
    /// Set an open handle's attributes (SMB2 SET_INFO; CIFS TRANS2_SET_FILE_INFORMATION).
    Fsetattr,
    /// Read an open handle's security descriptor (SMB2 QUERY_INFO security; CIFS NT_TRANSACT_QUERY_SECURITY_DESC).
    Getsecurity,
}

impl Op {
    pub const ALL: [Op; 27] = [
        Op::Null,
        Op::Getattr,
        Op::Setattr,
        Op::Lookup,
        Op::Access,
        Op::Readlink,
        Op::Read,
        Op::Write,
        Op::Create,
        Op::Mkdir,
        Op::Symlink,
        Op::Remove,
        Op::Rmdir,
        Op::Rename,
        Op::Link,
        Op::Readdir,
        Op::Readdirplus,
        Op::Fsstat,
        Op::Fsinfo,
        Op::Pathconf,
        Op::Commit,
        Op::Lock,
        Op::Open,
        Op::Close,
        Op::Fgetattr,
        Op::Fsetattr,
        Op::Getsecurity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Null => "null",
            Op::Getattr => "getattr",
            Op::Setattr => "setattr",
            Op::Lookup => "lookup",
            Op::Access => "access",
            Op::Readlink => "readlink",
            Op::Read => "read",
            Op::Write => "write",
            Op::Create => "create",
            Op::Mkdir => "mkdir",
            Op::Symlink => "symlink",
            Op::Remove => "remove",
            Op::Rmdir => "rmdir",
            Op::Rename => "rename",
            Op::Link => "link",
            Op::Readdir => "readdir",
            Op::Readdirplus => "readdirplus",
            Op::Fsstat => "fsstat",
            Op::Fsinfo => "fsinfo",
            Op::Pathconf => "pathconf",
            Op::Commit => "commit",
            Op::Lock => "lock",
            Op::Open => "open",
            Op::Close => "close",
            Op::Fgetattr => "fgetattr",
            Op::Fsetattr => "fsetattr",
            Op::Getsecurity => "getsecurity",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Ops that act on an existing file of the set.
    pub fn needs_file(self) -> bool {
        matches!(
            self,
            Op::Getattr
                | Op::Setattr
                | Op::Lookup
                | Op::Access
                | Op::Read
                | Op::Write
                | Op::Remove
                | Op::Rename
                | Op::Link
                | Op::Commit
                | Op::Symlink
                | Op::Lock
                | Op::Open
                | Op::Close
                | Op::Fgetattr
                | Op::Fsetattr
                | Op::Getsecurity
        )
    }

    /// The ops that open, use and close a handle explicitly: only a target with handles (SMB) does them.
    pub fn explicit_handle(self) -> bool {
        matches!(self, Op::Open | Op::Close | Op::Fgetattr | Op::Fsetattr | Op::Getsecurity)
    }

    /// Ops that act on a handle `open` made and `close` releases: a Markov workload issues them
    /// only while it holds one (spec.rs checks its states).
    pub fn on_handle(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::Commit | Op::Lock | Op::Fgetattr | Op::Fsetattr | Op::Getsecurity | Op::Close)
    }
}

/// One operation, with paths relative to the file-set root.
#[derive(Debug, Clone)]
pub enum Request {
    Null,
    Getattr {
        path: String,
    },
    /// Set the file's permission bits (a workload sets 0o644; validation sets others and reads them back).
    Setattr {
        path: String,
        mode: u32,
    },
    Lookup {
        dir: String,
        name: String,
    },
    Access {
        path: String,
    },
    Readlink {
        path: String,
    },
    /// A logical read or write of `len` bytes at `offset`, in transfers of at most `xfer` bytes.
    /// A read of `len` WHOLE from offset 0 reads the whole file, whatever its size.
    Read {
        path: String,
        /// The file by its index in the workload's file set, for a target that keys its open
        /// descriptors by it (posix: `Generator::indexed_reads`); `path` is empty then.
        file: Option<IndexedFile>,
        offset: u64,
        len: u64,
        xfer: u64,
    },
    Write {
        path: String,
        offset: u64,
        len: u64,
        xfer: u64,
    },
    Create {
        path: String,
    },
    Mkdir {
        path: String,
    },
    Symlink {
        path: String,
        points_to: String,
    },
    Remove {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Link {
        from: String,
        to: String,
    },
    Readdir {
        path: String,
        plus: bool,
    },
    Fsstat,
    Fsinfo,
    Pathconf,
    Commit {
        path: String,
    },
    /// Lock a byte range of an open file and release it.
    Lock {
        path: String,
    },
    /// The handle ops of a Markov workload (Op::Open ... Op::Getsecurity), on the file at `path`.
    Handle {
        op: HandleOp,
        path: String,
    },
}

/// A file of the workload's set, by index, with its path formatted once and shared by every
/// read of it until a rename or remove changes what the path names.
#[derive(Debug, Clone)]
pub struct IndexedFile {
    pub index: u32,
    pub path: Arc<str>,
}

/// What a `Request::Handle` does with the handle of its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleOp {
    Open,
    Close,
    Getattr,
    Setattr,
    Getsecurity,
}

/// `Request::Read { offset: 0, len: WHOLE, .. }`: the whole file (an HTTP GET; a
/// file system reads to the end of the file).
pub const WHOLE: u64 = u64::MAX;

/// Bytes moved, or the kind of error (an errno name such as "ENOENT").
pub type Outcome = Result<u64, String>;

/// What an op observed, as `Target::probe` returns it to validation; trials call `execute`, which
/// keeps only the byte count, so none of this is built on the measured path.
#[derive(Debug)]
pub enum Reply {
    /// The op succeeded and has nothing to show but the bytes it moved.
    Done(u64),
    /// The bytes a read returned (fewer than asked at the end of the file).
    Data(Vec<u8>),
    /// A getattr's or lookup's attributes.
    Attr(Attr),
    /// An access check: whether read and modify access is granted.
    Granted(bool),
    /// A readlink's link text, or a summary of the file-system figures (fsstat, fsinfo, pathconf).
    Text(String),
    /// A readdir's names, without . and ..
    Names(Vec<String>),
}

/// The type of an object, as validation checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub kind: Kind,
    /// Permission bits; None where the protocol has none (SMB2).
    pub mode: Option<u32>,
    pub size: u64,
    pub nlink: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_json() {
        for op in Op::ALL {
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(json, format!("\"{}\"", op.name()));
            assert_eq!(serde_json::from_str::<Op>(&json).unwrap(), op);
        }
    }
}
