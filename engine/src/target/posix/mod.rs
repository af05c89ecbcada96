//! A directory on any mounted file system. Every op is a system call relative
//! to the file-set root's directory descriptor (fstatat, pread, openat, ...),
//! so path resolution starts below the target; opens refuse symlinks and `..`
//! (openat2), and calls that change a name are made relative to the directory
//! opened that way, so a symlink planted in the file set is an error (ELOOP) for
//! that op, never a way to write outside the target.
//!
//! Reads go through a per-thread cache of open read-only descriptors (fdcache.rs).
//! Writes, creates and commits still open and close per op, so close-to-open
//! flushing on network file systems is unchanged. `"fd_cache": false` in the
//! target spec opens and closes per read too. sys.rs holds the system-call helpers.

mod fdcache;
mod sys;

pub use sys::errno_name;

use super::{FileStore, Target};
use crate::op::{Attr, IndexedFile, Kind, Op, Outcome, Reply, Request};
use anyhow::{anyhow, bail, Context};
use fdcache::{Key, ReadCache};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use sys::{check, cstr, errno, with_buf, with_cstr, Fd};

pub struct Posix {
    base: OwnedFd,
    base_path: String,
    root: Option<OwnedFd>,
    /// None: `"fd_cache": false`, every read opens and closes.
    cache: Option<ReadCache>,
}

impl Posix {
    /// A target with the read-descriptor cache on (the spec's default).
    pub fn open(path: &str) -> anyhow::Result<Posix> {
        Self::open_with(path, true)
    }

    pub fn open_with(path: &str, fd_cache: bool) -> anyhow::Result<Posix> {
        let fd = unsafe { libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            bail!("target {path}: {}", std::io::Error::last_os_error());
        }
        Ok(Posix { base: unsafe { OwnedFd::from_raw_fd(fd) }, base_path: path.to_string(), root: None, cache: fd_cache.then(ReadCache::new) })
    }

    /// `path` may now name another file (or none): cached descriptors for it must go.
    fn invalidate(&self, path: &str) {
        if let Some(cache) = &self.cache {
            cache.invalidate(path);
        }
    }

    #[inline(always)] // into the read: a call costs about as much as the loop around the pread
    fn pread_all(fd: RawFd, offset: u64, len: u64, xfer: u64) -> Outcome {
        let chunk = (xfer.clamp(1, 1 << 24) as usize).min(len.max(1) as usize);
        with_buf(chunk, |buf| {
            let mut done = 0u64;
            while done < len {
                let n = ((len - done) as usize).min(buf.len());
                // The system call itself: libc's pread wraps it in thread-cancellation bookkeeping.
                let got = unsafe { libc::syscall(libc::SYS_pread64, fd, buf.as_mut_ptr(), n, (offset + done) as libc::off_t) };
                let got = check(got as libc::c_long)? as u64;
                done += got;
                if got == 0 {
                    break; // end of file
                }
            }
            Ok(done)
        })
    }

    /// Every op but the two `Target::execute` takes itself.
    #[inline(never)]
    fn execute_other(&self, request: &Request) -> Outcome {
        let root = self.root();
        let ok = |ret: libc::c_int| check(ret as libc::c_long).map(|_| 0u64);
        match request {
            Request::Null => Ok(0),
            Request::Lock { .. } | Request::Handle { .. } => Err("EOPNOTSUPP".into()), // refused before a trial (supports)
            Request::Setattr { path, mode } => {
                // A symlink's own mode cannot change (EOPNOTSUPP), its target's must not. Not through
                // fchmodat's AT_SYMLINK_NOFOLLOW: glibc emulates it with /proc/self/fd, which names the
                // process's descriptor table, not a sender's own (enter_sender_thread), and it failed every time.
                let (dir, name) = self.parent_of(path)?;
                let at = dir.as_ref().map_or(root, |d| d.0);
                with_cstr(name, |p| {
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    ok(unsafe { libc::fstatat(at, p, &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
                    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                        return Err("EOPNOTSUPP".into());
                    }
                    ok(unsafe { libc::fchmodat(at, p, *mode, 0) })
                })?
            }
            Request::Lookup { dir, name } => {
                let d = self.openat(root, if dir.is_empty() { "." } else { dir }, libc::O_PATH | libc::O_DIRECTORY, 0)?;
                self.stat(d.0, name).map(|_| 0)
            }
            Request::Access { path } => ok(with_cstr(path, |p| unsafe { libc::faccessat(root, p, libc::R_OK | libc::W_OK, 0) })?),
            Request::Readlink { path } => {
                let mut buf = [0u8; 4096];
                let n = with_cstr(path, |p| unsafe { libc::readlinkat(root, p, buf.as_mut_ptr() as *mut _, buf.len()) })?;
                check(n as libc::c_long).map(|n| n as u64)
            }
            Request::Getattr { .. } | Request::Read { .. } => unreachable!("Target::execute takes them"),
            Request::Write { path, offset, len, xfer } => self.write(path, *offset, *len, *xfer),
            Request::Create { path } => self.openat(root, path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644).map(|_| 0),
            Request::Mkdir { path } => {
                let (dir, name) = self.parent_of(path)?;
                let at = dir.as_ref().map_or(root, |d| d.0);
                ok(with_cstr(name, |p| unsafe { libc::mkdirat(at, p, 0o755) })?)
            }
            Request::Symlink { path, points_to } => {
                let (dir, name) = self.parent_of(path)?;
                let at = dir.as_ref().map_or(root, |d| d.0);
                ok(with_cstr(points_to, |t| with_cstr(name, |p| unsafe { libc::symlinkat(t, at, p) }))??)
            }
            Request::Remove { path } => {
                let (dir, name) = self.parent_of(path)?;
                let at = dir.as_ref().map_or(root, |d| d.0);
                let r = ok(with_cstr(name, |p| unsafe { libc::unlinkat(at, p, 0) })?);
                self.invalidate(path);
                r
            }
            Request::Rmdir { path } => {
                let (dir, name) = self.parent_of(path)?;
                let at = dir.as_ref().map_or(root, |d| d.0);
                let r = ok(with_cstr(name, |p| unsafe { libc::unlinkat(at, p, libc::AT_REMOVEDIR) })?);
                self.invalidate(path);
                r
            }
            Request::Rename { from, to } => {
                let ((from_dir, from_name), (to_dir, to_name)) = (self.parent_of(from)?, self.parent_of(to)?);
                let (f_at, t_at) = (from_dir.as_ref().map_or(root, |d| d.0), to_dir.as_ref().map_or(root, |d| d.0));
                let r = ok(with_cstr(from_name, |f| with_cstr(to_name, |t| unsafe { libc::renameat(f_at, f, t_at, t) }))??);
                self.invalidate(from);
                self.invalidate(to); // it may have replaced a file
                r
            }
            Request::Link { from, to } => {
                let ((from_dir, from_name), (to_dir, to_name)) = (self.parent_of(from)?, self.parent_of(to)?);
                let (f_at, t_at) = (from_dir.as_ref().map_or(root, |d| d.0), to_dir.as_ref().map_or(root, |d| d.0));
                ok(with_cstr(from_name, |f| with_cstr(to_name, |t| unsafe { libc::linkat(f_at, f, t_at, t, 0) }))??)
            }
            Request::Readdir { path, plus } => self.readdir(path, *plus),
            Request::Fsstat | Request::Fsinfo => {
                let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                ok(unsafe { libc::fstatvfs(root, &mut st) })
            }
            Request::Pathconf => {
                unsafe { *libc::__errno_location() = 0 };
                let v = unsafe { libc::fpathconf(root, libc::_PC_NAME_MAX) };
                if v < 0 && errno() != 0 {
                    return Err(errno_name(errno()));
                }
                Ok(0)
            }
            Request::Commit { path } => {
                let fd = self.openat(root, path, libc::O_WRONLY, 0)?;
                ok(unsafe { libc::fsync(fd.0) })
            }
        }
    }

    fn root(&self) -> RawFd {
        self.root.as_ref().unwrap_or(&self.base).as_raw_fd()
    }

    /// Open `path` beneath `dir` without following a symlink anywhere in it and without leaving
    /// `dir` (openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a symlink planted in the file set
    /// fails that op with ELOOP instead of leading out of the target. Kernels before 5.6 have no
    /// openat2; there O_NOFOLLOW still refuses a symlink as the last component.
    fn openat(&self, dir: RawFd, path: &str, flags: i32, mode: libc::mode_t) -> Result<Fd, String> {
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.mode = if flags & libc::O_CREAT != 0 { mode as u64 } else { 0 }; // openat2 wants 0 otherwise
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
        let size = std::mem::size_of::<libc::open_how>();
        let fd = with_cstr(path, |p| unsafe { libc::syscall(libc::SYS_openat2, dir, p, &how as *const libc::open_how, size) })?;
        if fd < 0 && errno() == libc::ENOSYS {
            let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
            let fd = with_cstr(path, |p| unsafe { libc::openat(dir, p, flags, mode as libc::c_uint) })?;
            return check(fd as libc::c_long).map(|fd| Fd(fd as RawFd));
        }
        check(fd).map(|fd| Fd(fd as RawFd))
    }

    /// The directory that holds `path`'s last component, opened as `openat` opens (contained, no
    /// symlinks), and that component. Calls that take a name (mkdirat, unlinkat, renameat, ...)
    /// follow symlinks in the directories of a path, so the ones that change something are made
    /// relative to this descriptor. None: the component lies in `root` itself.
    fn parent_of<'p>(&self, path: &'p str) -> Result<(Option<Fd>, &'p str), String> {
        match path.rsplit_once('/') {
            None => Ok((None, path)),
            Some((dir, name)) => Ok((Some(self.openat(self.root(), dir, libc::O_PATH | libc::O_DIRECTORY, 0)?), name)),
        }
    }

    fn read(&self, path: &str, file: Option<&IndexedFile>, offset: u64, len: u64, xfer: u64) -> Outcome {
        let path = file.map_or(path, |f| &f.path);
        if let Some(cache) = &self.cache {
            let key = file.map_or(Key::Path(path), |f| Key::File(f.index, path));
            return cache.with_fd(key, |path| self.openat(self.root(), path, libc::O_RDONLY, 0), |fd| Self::pread_all(fd, offset, len, xfer));
        }
        let fd = self.openat(self.root(), path, libc::O_RDONLY, 0)?;
        Self::pread_all(fd.0, offset, len, xfer)
    }

    fn write(&self, path: &str, offset: u64, len: u64, xfer: u64) -> Outcome {
        let fd = self.openat(self.root(), path, libc::O_WRONLY, 0)?;
        let chunk = (xfer.clamp(1, 1 << 24) as usize).min(len.max(1) as usize);
        with_buf(chunk, |buf| {
            let mut done = 0u64;
            while done < len {
                let n = ((len - done) as usize).min(buf.len());
                let at = offset + done;
                crate::content::fill(&mut buf[..n], at);
                let got = unsafe { libc::pwrite(fd.0, buf.as_ptr() as *const _, n, at as libc::off_t) };
                let got = check(got as libc::c_long)? as u64;
                done += got;
                if got == 0 {
                    break;
                }
            }
            Ok(done)
        })
    }

    fn readdir(&self, path: &str, plus: bool) -> Outcome {
        let dir = self.openat(self.root(), if path.is_empty() { "." } else { path }, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        with_buf(32 * 1024, |buf| self.readdir_into(&dir, buf, plus))
    }

    fn readdir_into(&self, dir: &Fd, buf: &mut [u8], plus: bool) -> Outcome {
        let mut bytes = 0u64;
        loop {
            let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.0, buf.as_mut_ptr(), buf.len()) };
            let n = check(n)? as usize;
            if n == 0 {
                return Ok(bytes);
            }
            bytes += n as u64;
            if plus {
                // linux_dirent64: ino u64, off i64, reclen u16, type u8, name NUL-terminated
                let mut at = 0;
                while at < n {
                    let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                    let name = &buf[at + 19..at + reclen];
                    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                    if name != b"." && name != b".." {
                        let mut st: libc::stat = unsafe { std::mem::zeroed() };
                        let c = CString::new(name).expect("dirent names have no NUL");
                        check(unsafe { libc::fstatat(dir.0, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } as libc::c_long)?;
                    }
                    at += reclen;
                }
            }
        }
    }

    fn stat(&self, dir: RawFd, path: &str) -> Result<libc::stat, String> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit(); // filled by the kernel
        check(with_cstr(path, |p| unsafe { libc::fstatat(dir, p, st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) })? as libc::c_long)?;
        // SAFETY: fstatat succeeded, so it filled the whole struct.
        Ok(unsafe { st.assume_init() })
    }

    fn io_error(&self, what: &str, path: &str) -> anyhow::Error {
        anyhow!("target {}: {what} {path}: {}", self.base_path, std::io::Error::last_os_error())
    }
}

impl Target for Posix {
    fn supports(&self, op: Op) -> bool {
        // Byte-range locks and the handle ops of a Markov workload are SMB's alone so far.
        op != Op::Lock && !op.explicit_handle()
    }

    fn execute(&self, request: &Request) -> Outcome {
        // Reads and getattrs in a small function: the other ops' many arms would make every
        // call save and restore the registers they use.
        match request {
            Request::Getattr { path } => self.stat(self.root(), path).map(|_| 0),
            Request::Read { path, file, offset, len, xfer } => self.read(path, file.as_ref(), *offset, *len, *xfer),
            _ => self.execute_other(request),
        }
    }

    fn probe(&self, request: &Request) -> Result<Reply, String> {
        self.observe(request)
    }

    /// The sender gets a descriptor table of its own (a copy of the process's, made before it
    /// opens anything). While a table is shared by several threads, the kernel takes and drops a
    /// reference on the file for every call on a descriptor (pread, and fstatat relative to the
    /// root); on a table of one thread it does not, as for fio's job processes and the raw loop.
    /// (A raw pread loop with one idle thread beside it ran at 0.83-1.00x its own rate, BENCHMARKS.md
    /// §2.) Every descriptor a sender opens stays its own: its read cache, and the per-op opens it
    /// closes itself.
    fn enter_sender_thread(&self) {
        // Failure (a seccomp filter, say) only leaves the table shared: the ops work the same.
        unsafe { libc::unshare(libc::CLONE_FILES) };
    }

    fn store(&self) -> Option<&dyn FileStore> {
        Some(self)
    }

    fn store_mut(&mut self) -> Option<&mut dyn FileStore> {
        Some(self)
    }
}

impl FileStore for Posix {
    fn enter_fileset(&mut self, id: &str, create: bool) -> anyhow::Result<()> {
        if create {
            let r = unsafe { libc::mkdirat(self.base.as_raw_fd(), cstr(id).as_ptr(), 0o755) };
            if r < 0 && errno() != libc::EEXIST {
                return Err(self.io_error("mkdir", id));
            }
        }
        let fd = unsafe { libc::openat(self.base.as_raw_fd(), cstr(id).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(self.io_error("open", id));
        }
        self.root = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    fn is_empty(&self) -> anyhow::Result<bool> {
        Ok(std::fs::read_dir(&self.base_path).with_context(|| format!("target {}", self.base_path))?.next().is_none())
    }

    fn read_meta(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match std::fs::read(format!("{}/{name}", self.base_path)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow!("target {}: read {name}: {e}", self.base_path)),
        }
    }

    fn write_meta(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        // Write beside, fsync, rename: a crash leaves the old or the new manifest, never half of one.
        let tmp = format!("{}/.{name}.tmp", self.base_path);
        let dest = format!("{}/{name}", self.base_path);
        let f = std::fs::File::create(&tmp).and_then(|mut f| {
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()
        });
        f.and_then(|_| std::fs::rename(&tmp, &dest)).map_err(|e| anyhow!("target {}: write {name}: {e}", self.base_path))
    }

    fn ensure_dir(&self, path: &str) -> anyhow::Result<()> {
        let (dir, name) = self.parent_of(path).map_err(|_| self.io_error("open the parent of", path))?;
        let r = unsafe { libc::mkdirat(dir.as_ref().map_or(self.root(), |d| d.0), cstr(name).as_ptr(), 0o755) };
        if r < 0 && errno() != libc::EEXIST {
            return Err(self.io_error("mkdir", path));
        }
        Ok(())
    }

    fn ensure_file(&self, path: &str, size: u64, content: &[u8]) -> anyhow::Result<()> {
        self.invalidate(path);
        let fd = self.openat(self.root(), path, libc::O_CREAT | libc::O_WRONLY, 0o644).map_err(|_| self.io_error("create", path))?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.0, &mut st) } < 0 {
            return Err(self.io_error("stat", path));
        }
        let have = st.st_size as u64;
        if have == size {
            return Ok(());
        }
        if have > size && unsafe { libc::ftruncate(fd.0, size as libc::off_t) } < 0 {
            return Err(self.io_error("truncate", path));
        }
        // Complete a file that an interrupted prepare left short.
        let mut at = have.min(size);
        while at < size {
            let start = (at % content.len() as u64) as usize;
            let n = ((size - at) as usize).min(content.len() - start);
            let w = unsafe { libc::pwrite(fd.0, content[start..].as_ptr() as *const _, n, at as libc::off_t) };
            if w <= 0 {
                return Err(self.io_error("write", path));
            }
            at += w as u64;
        }
        Ok(())
    }

    fn ensure_symlink(&self, path: &str, points_to: &str) -> anyhow::Result<()> {
        let (dir, name) = self.parent_of(path).map_err(|_| self.io_error("open the parent of", path))?;
        let at = dir.as_ref().map_or(self.root(), |d| d.0);
        let r = unsafe { libc::symlinkat(cstr(points_to).as_ptr(), at, cstr(name).as_ptr()) };
        if r < 0 && errno() != libc::EEXIST {
            return Err(self.io_error("symlink", path));
        }
        Ok(())
    }

    fn truncate(&self, path: &str, size: u64) -> anyhow::Result<()> {
        let fd = self.openat(self.root(), path, libc::O_WRONLY, 0).map_err(|_| self.io_error("open", path))?;
        if unsafe { libc::ftruncate(fd.0, size as libc::off_t) } < 0 {
            return Err(self.io_error("truncate", path));
        }
        Ok(())
    }
}

fn attr_of(st: &libc::stat) -> Attr {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    };
    Attr { kind, mode: Some(st.st_mode), size: st.st_size as u64, nlink: st.st_nlink as u32 }
}

impl Posix {
    /// `Target::probe`: the ops whose effect validation checks, through the same system calls as
    /// `execute`, keeping what they return; the other ops are `execute` itself.
    fn observe(&self, request: &Request) -> Result<Reply, String> {
        let root = self.root();
        match request {
            Request::Read { path, offset, len, .. } => {
                let fd = self.openat(root, path, libc::O_RDONLY, 0)?;
                let mut buf = vec![0u8; *len as usize];
                let n = unsafe { libc::pread(fd.0, buf.as_mut_ptr() as *mut _, buf.len(), *offset as libc::off_t) };
                buf.truncate(check(n as libc::c_long)? as usize);
                Ok(Reply::Data(buf))
            }
            Request::Getattr { path } => self.stat(root, path).map(|st| Reply::Attr(attr_of(&st))),
            Request::Lookup { dir, name } => {
                let d = self.openat(root, if dir.is_empty() { "." } else { dir }, libc::O_PATH | libc::O_DIRECTORY, 0)?;
                self.stat(d.0, name).map(|st| Reply::Attr(attr_of(&st)))
            }
            Request::Access { .. } => match self.execute(request) {
                Ok(_) => Ok(Reply::Granted(true)),
                Err(e) if e == "EACCES" => Ok(Reply::Granted(false)),
                Err(e) => Err(e),
            },
            Request::Readlink { path } => {
                let mut buf = [0u8; 4096];
                let n = with_cstr(path, |p| unsafe { libc::readlinkat(root, p, buf.as_mut_ptr() as *mut _, buf.len()) })?;
                let n = check(n as libc::c_long)? as usize;
                Ok(Reply::Text(String::from_utf8_lossy(&buf[..n]).into_owned()))
            }
            Request::Readdir { path, .. } => {
                self.execute(request)?;
                let names = std::fs::read_dir(format!("{}/{path}", self.root_path())).map_err(|e| format!("readdir: {e}"))?;
                Ok(Reply::Names(names.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect()))
            }
            Request::Fsstat | Request::Fsinfo => {
                let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                check(unsafe { libc::fstatvfs(root, &mut st) } as libc::c_long)?;
                let f = st.f_frsize as u64;
                Ok(Reply::Text(match request {
                    Request::Fsstat => {
                        format!("{} of {} bytes free, {} of {} files free", st.f_bavail as u64 * f, st.f_blocks as u64 * f, st.f_ffree, st.f_files)
                    }
                    _ => format!("block size {}, name max {}", st.f_bsize, st.f_namemax),
                }))
            }
            Request::Pathconf => {
                self.execute(request)?;
                let n = unsafe { libc::fpathconf(root, libc::_PC_NAME_MAX) };
                let l = unsafe { libc::fpathconf(root, libc::_PC_LINK_MAX) };
                Ok(Reply::Text(format!("name_max {n}, link_max {l}")))
            }
            _ => self.execute(request).map(Reply::Done),
        }
    }
}

impl Posix {
    fn root_path(&self) -> String {
        // The root's own path, through /proc: the file-set root when one was entered.
        std::fs::read_link(format!("/proc/self/fd/{}", self.root())).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| self.base_path.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TempDir(String);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn target(name: &str) -> (TempDir, Posix) {
        let dir = std::env::temp_dir().join(format!("peakbench-posix-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.to_str().unwrap().to_string();
        let mut p = Posix::open_with(&path, true).unwrap();
        p.enter_fileset("fs", true).unwrap();
        (TempDir(path), p)
    }

    fn read(p: &Posix, path: &str, len: u64) -> Outcome {
        p.execute(&Request::Read { path: path.into(), file: None, offset: 0, len, xfer: 4096 })
    }

    #[test]
    fn cached_reads_follow_remove_rename_and_recreate() {
        let (_dir, p) = target("semantics");
        p.ensure_file("a", 100, &[7u8; 4096]).unwrap();
        p.ensure_file("b", 300, &[7u8; 4096]).unwrap();
        assert_eq!(read(&p, "a", 4096), Ok(100));
        assert_eq!(read(&p, "a", 4096), Ok(100)); // from the cache
                                                  // Renamed away: the old name is gone, the new one reads the same file.
        assert_eq!(p.execute(&Request::Rename { from: "a".into(), to: "a.1".into() }), Ok(0));
        assert_eq!(read(&p, "a", 4096), Err("ENOENT".into()));
        assert_eq!(read(&p, "a.1", 4096), Ok(100));
        // Renamed over another file: the target name now reads the moved file.
        assert_eq!(read(&p, "b", 4096), Ok(300));
        assert_eq!(p.execute(&Request::Rename { from: "a.1".into(), to: "b".into() }), Ok(0));
        assert_eq!(read(&p, "b", 4096), Ok(100));
        // Removed: ENOENT, not the unlinked file's data through an old descriptor.
        assert_eq!(p.execute(&Request::Remove { path: "b".into() }), Ok(0));
        assert_eq!(read(&p, "b", 4096), Err("ENOENT".into()));
        // Re-created (as restore does): the new file.
        p.ensure_file("b", 50, &[7u8; 4096]).unwrap();
        assert_eq!(read(&p, "b", 4096), Ok(50));
    }

    #[test]
    fn reads_by_file_index_follow_a_rename_over_the_file_and_a_remove() {
        let (_dir, p) = target("indexed");
        p.ensure_file("a", 100, &[7u8; 4096]).unwrap();
        p.ensure_file("b", 300, &[7u8; 4096]).unwrap();
        let b = IndexedFile { index: 1, path: "b".into() };
        let read_b = |p: &Posix| p.execute(&Request::Read { path: String::new(), file: Some(b.clone()), offset: 0, len: 4096, xfer: 4096 });
        assert_eq!(read_b(&p), Ok(300));
        assert_eq!(read_b(&p), Ok(300)); // by index, from the cache
                                         // Another thread renames a file over b's path: the cached descriptor by index must go.
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(p.execute(&Request::Rename { from: "a".into(), to: "b".into() }), Ok(0)));
        });
        assert_eq!(read_b(&p), Ok(100));
        assert_eq!(p.execute(&Request::Remove { path: "b".into() }), Ok(0));
        assert_eq!(read_b(&p), Err("ENOENT".into()));
    }

    #[test]
    fn a_sender_thread_keeps_its_descriptors_in_a_table_of_its_own() {
        let (dir, p) = target("own-table");
        p.ensure_file("x", 10, &[1u8; 4096]).unwrap();
        let file = std::path::PathBuf::from(format!("{}/fs/x", dir.0));
        let open_in =
            |table: &str| std::fs::read_dir(table).unwrap().filter(|e| std::fs::read_link(e.as_ref().unwrap().path()).is_ok_and(|l| l == file)).count();
        std::thread::scope(|s| {
            s.spawn(|| {
                p.enter_sender_thread();
                assert_eq!(read(&p, "x", 4096), Ok(10)); // opened and cached
                assert_eq!(open_in("/proc/thread-self/fd"), 1);
                // The process's table (its first thread's) is shared by every other thread: a
                // descriptor there costs a file reference per call on it.
                assert_eq!(open_in("/proc/self/fd"), 0, "the cached descriptor is in the shared table");
            });
        });
    }

    #[test]
    fn another_threads_remove_reaches_this_threads_cache() {
        let (_dir, p) = target("threads");
        p.ensure_file("x", 10, &[1u8; 4096]).unwrap();
        assert_eq!(read(&p, "x", 4096), Ok(10)); // cached in this thread
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(read(&p, "x", 4096), Ok(10)); // cached in that thread too
                assert_eq!(p.execute(&Request::Remove { path: "x".into() }), Ok(0));
            });
        });
        assert_eq!(read(&p, "x", 4096), Err("ENOENT".into()));
        p.ensure_file("x", 20, &[1u8; 4096]).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(p.execute(&Request::Rename { from: "x".into(), to: "y".into() }), Ok(0)));
        });
        assert_eq!(read(&p, "x", 4096), Err("ENOENT".into()));
        assert_eq!(read(&p, "y", 4096), Ok(20));
    }

    #[test]
    fn a_thread_far_behind_the_log_drops_its_whole_cache() {
        let (_dir, p) = target("behind");
        p.ensure_file("keep", 5, &[1u8; 4096]).unwrap();
        p.ensure_file("gone", 6, &[1u8; 4096]).unwrap();
        assert_eq!(read(&p, "keep", 4096), Ok(5));
        assert_eq!(read(&p, "gone", 4096), Ok(6));
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(p.execute(&Request::Remove { path: "gone".into() }), Ok(0));
                for i in 0..fdcache::LOG_LEN + 10 {
                    p.invalidate(&format!("other{i}"));
                }
            });
        });
        assert_eq!(read(&p, "gone", 4096), Err("ENOENT".into()));
        assert_eq!(read(&p, "keep", 4096), Ok(5));
    }

    #[test]
    fn reads_by_file_index_past_the_budget_close_others_and_still_follow_a_remove() {
        let (dir, _) = target("index-budget");
        let mut p = Posix::open_with(&dir.0, true).unwrap();
        p.enter_fileset("fs", true).unwrap();
        p.cache.as_mut().expect("cache on").limit = 2;
        let files: Vec<IndexedFile> = (0..5u32).map(|i| IndexedFile { index: i, path: format!("f{i}").into() }).collect();
        for (i, f) in files.iter().enumerate() {
            p.ensure_file(&f.path, 1000 + i as u64, &[3u8; 4096]).unwrap();
        }
        let read = |p: &Posix, f: &IndexedFile| p.execute(&Request::Read { path: String::new(), file: Some(f.clone()), offset: 0, len: 4096, xfer: 4096 });
        for _ in 0..3 {
            for (i, f) in files.iter().enumerate() {
                assert_eq!(read(&p, f), Ok(1000 + i as u64));
            }
        }
        assert!(p.cache.as_ref().expect("cache on").cached.load(std::sync::atomic::Ordering::Relaxed) <= 2);
        // Whichever descriptors survived, a removed file reads as gone and a re-created one anew.
        for f in &files[3..] {
            assert_eq!(p.execute(&Request::Remove { path: f.path.to_string() }), Ok(0));
            assert_eq!(read(&p, f), Err("ENOENT".into()));
        }
        p.ensure_file(&files[4].path, 7, &[3u8; 4096]).unwrap();
        assert_eq!(read(&p, &files[4]), Ok(7));
    }

    #[test]
    fn reads_work_without_the_cache_and_past_its_budget() {
        let (dir, _) = target("budget");
        let mut p = Posix::open_with(&dir.0, true).unwrap();
        p.enter_fileset("fs", true).unwrap();
        p.cache.as_mut().expect("cache on").limit = 2;
        for i in 0..5 {
            p.ensure_file(&format!("f{i}"), 1000 + i, &[3u8; 4096]).unwrap();
        }
        for _ in 0..3 {
            for i in 0..5 {
                assert_eq!(read(&p, &format!("f{i}"), 4096), Ok(1000 + i));
            }
        }
        assert!(p.cache.as_ref().expect("cache on").cached.load(std::sync::atomic::Ordering::Relaxed) <= 2);
        let mut q = Posix::open_with(&dir.0, false).unwrap();
        q.enter_fileset("fs", false).unwrap();
        assert_eq!(read(&q, "f3", 4096), Ok(1003));
        // Transfers in several chunks, and a read past the end.
        assert_eq!(q.execute(&Request::Read { path: "f4".into(), file: None, offset: 0, len: 1004, xfer: 100 }), Ok(1004));
        assert_eq!(p.execute(&Request::Read { path: "f4".into(), file: None, offset: 1000, len: 100, xfer: 64 }), Ok(4));
    }
}
