//! A directory on any mounted file system. Every op is a system call relative
//! to the file-set root's directory descriptor (fstatat, pread, openat, ...),
//! so path resolution starts below the target and never walks outside it.

use super::{Outcome, Request, Target};
use crate::workload::mix::Op;
use anyhow::{anyhow, bail, Context};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct Posix {
    base: OwnedFd,
    base_path: String,
    root: Option<OwnedFd>,
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("generated paths contain no NUL")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The symbolic name of an errno, as users see it in `errno.h`.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ESTALE => "ESTALE",
        libc::EDQUOT => "EDQUOT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EINTR => "EINTR",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno{e}"),
    };
    name.to_string()
}

/// Turn a libc return value into an Outcome: negative means failure with errno.
fn check(ret: libc::c_long) -> Result<libc::c_long, String> {
    if ret < 0 {
        Err(errno_name(errno()))
    } else {
        Ok(ret)
    }
}

struct Fd(RawFd);
impl Drop for Fd {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}

impl Posix {
    pub fn open(path: &str) -> anyhow::Result<Posix> {
        let fd = unsafe { libc::open(cstr(path).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            bail!("target {path}: {}", std::io::Error::last_os_error());
        }
        Ok(Posix { base: unsafe { OwnedFd::from_raw_fd(fd) }, base_path: path.to_string(), root: None })
    }

    fn root(&self) -> RawFd {
        self.root.as_ref().unwrap_or(&self.base).as_raw_fd()
    }

    fn openat(&self, dir: RawFd, path: &str, flags: i32, mode: libc::mode_t) -> Result<Fd, String> {
        let fd = unsafe { libc::openat(dir, cstr(path).as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
        check(fd as libc::c_long).map(|fd| Fd(fd as RawFd))
    }

    fn transfer(&self, path: &str, write: bool, offset: u64, len: u64, xfer: u64) -> Outcome {
        let fd = self.openat(self.root(), path, if write { libc::O_WRONLY } else { libc::O_RDONLY }, 0)?;
        let chunk = xfer.clamp(1, 1 << 24) as usize;
        let mut buf = vec![0u8; chunk.min(len.max(1) as usize)];
        if write {
            fill_content(&mut buf, offset);
        }
        let mut done = 0u64;
        while done < len {
            let n = ((len - done) as usize).min(buf.len());
            let at = (offset + done) as libc::off_t;
            let got = if write {
                unsafe { libc::pwrite(fd.0, buf.as_ptr() as *const _, n, at) }
            } else {
                unsafe { libc::pread(fd.0, buf.as_mut_ptr() as *mut _, n, at) }
            };
            let got = check(got as libc::c_long)? as u64;
            done += got;
            if got == 0 {
                break; // end of file
            }
        }
        Ok(done)
    }

    fn readdir(&self, path: &str, plus: bool) -> Outcome {
        let dir = self.openat(self.root(), if path.is_empty() { "." } else { path }, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let mut buf = vec![0u8; 32 * 1024];
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
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatat(dir, cstr(path).as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } as libc::c_long)?;
        Ok(st)
    }

    fn io_error(&self, what: &str, path: &str) -> anyhow::Error {
        anyhow!("target {}: {what} {path}: {}", self.base_path, std::io::Error::last_os_error())
    }
}

/// Deterministic, incompressible-looking file content: a function of the byte offset.
pub fn fill_content(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = (offset + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        *b = (x >> 56) as u8;
    }
}

impl Target for Posix {
    fn supports(&self, _op: Op) -> bool {
        true
    }

    fn execute(&self, request: &Request) -> Outcome {
        let root = self.root();
        let ok = |ret: libc::c_int| check(ret as libc::c_long).map(|_| 0u64);
        match request {
            Request::Null => Ok(0),
            Request::Getattr { path } => self.stat(root, path).map(|_| 0),
            Request::Setattr { path } => ok(unsafe { libc::fchmodat(root, cstr(path).as_ptr(), 0o644, 0) }),
            Request::Lookup { dir, name } => {
                let d = self.openat(root, if dir.is_empty() { "." } else { dir }, libc::O_PATH | libc::O_DIRECTORY, 0)?;
                self.stat(d.0, name).map(|_| 0)
            }
            Request::Access { path } => ok(unsafe { libc::faccessat(root, cstr(path).as_ptr(), libc::R_OK | libc::W_OK, 0) }),
            Request::Readlink { path } => {
                let mut buf = [0u8; 4096];
                let n = unsafe { libc::readlinkat(root, cstr(path).as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
                check(n as libc::c_long).map(|n| n as u64)
            }
            Request::Read { path, offset, len, xfer } => self.transfer(path, false, *offset, *len, *xfer),
            Request::Write { path, offset, len, xfer } => self.transfer(path, true, *offset, *len, *xfer),
            Request::Create { path } => self.openat(root, path, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644).map(|_| 0),
            Request::Mkdir { path } => ok(unsafe { libc::mkdirat(root, cstr(path).as_ptr(), 0o755) }),
            Request::Symlink { path, points_to } => ok(unsafe { libc::symlinkat(cstr(points_to).as_ptr(), root, cstr(path).as_ptr()) }),
            Request::Remove { path } => ok(unsafe { libc::unlinkat(root, cstr(path).as_ptr(), 0) }),
            Request::Rmdir { path } => ok(unsafe { libc::unlinkat(root, cstr(path).as_ptr(), libc::AT_REMOVEDIR) }),
            Request::Rename { from, to } => ok(unsafe { libc::renameat(root, cstr(from).as_ptr(), root, cstr(to).as_ptr()) }),
            Request::Link { from, to } => ok(unsafe { libc::linkat(root, cstr(from).as_ptr(), root, cstr(to).as_ptr(), 0) }),
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
        let r = unsafe { libc::mkdirat(self.root(), cstr(path).as_ptr(), 0o755) };
        if r < 0 && errno() != libc::EEXIST {
            return Err(self.io_error("mkdir", path));
        }
        Ok(())
    }

    fn ensure_file(&self, path: &str, size: u64, content: &[u8]) -> anyhow::Result<()> {
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
        let r = unsafe { libc::symlinkat(cstr(points_to).as_ptr(), self.root(), cstr(path).as_ptr()) };
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

fn attr_of(st: &libc::stat) -> crate::validate::Attr {
    use crate::validate::Kind;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    };
    crate::validate::Attr { kind, mode: st.st_mode, size: st.st_size as u64, nlink: st.st_nlink as u32 }
}

/// Validation through the system calls the posix target uses; errors name the call.
impl crate::validate::Probe for Posix {
    fn label(&self) -> String {
        self.base_path.clone()
    }
    fn null(&self) -> Result<(), String> {
        Ok(())
    }
    fn mkdir(&self, path: &str) -> Result<(), String> {
        self.execute(&Request::Mkdir { path: path.into() }).map(|_| ()).map_err(|e| format!("mkdirat: {e}"))
    }
    fn create(&self, path: &str) -> Result<(), String> {
        self.execute(&Request::Create { path: path.into() }).map(|_| ()).map_err(|e| format!("openat(O_CREAT|O_EXCL): {e}"))
    }
    fn write(&self, path: &str, offset: u64, data: &[u8]) -> Result<u64, String> {
        let fd = self.openat(self.root(), path, libc::O_WRONLY, 0).map_err(|e| format!("openat: {e}"))?;
        let n = unsafe { libc::pwrite(fd.0, data.as_ptr() as *const _, data.len(), offset as libc::off_t) };
        check(n as libc::c_long).map(|n| n as u64).map_err(|e| format!("pwrite: {e}"))
    }
    fn commit(&self, path: &str) -> Result<(), String> {
        self.execute(&Request::Commit { path: path.into() }).map(|_| ()).map_err(|e| format!("fsync: {e}"))
    }
    fn read(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String> {
        let fd = self.openat(self.root(), path, libc::O_RDONLY, 0).map_err(|e| format!("openat: {e}"))?;
        let mut buf = vec![0u8; len as usize];
        let n = unsafe { libc::pread(fd.0, buf.as_mut_ptr() as *mut _, buf.len(), offset as libc::off_t) };
        let n = check(n as libc::c_long).map_err(|e| format!("pread: {e}"))?;
        buf.truncate(n as usize);
        Ok(buf)
    }
    fn set_mode(&self, path: &str, mode: u32) -> Result<(), String> {
        check(unsafe { libc::fchmodat(self.root(), cstr(path).as_ptr(), mode, 0) } as libc::c_long).map(|_| ()).map_err(|e| format!("fchmodat: {e}"))
    }
    fn getattr(&self, path: &str) -> Result<crate::validate::Attr, String> {
        self.stat(self.root(), path).map(|st| attr_of(&st)).map_err(|e| format!("fstatat: {e}"))
    }
    fn lookup(&self, dir: &str, name: &str) -> Result<crate::validate::Attr, String> {
        let d = self.openat(self.root(), if dir.is_empty() { "." } else { dir }, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(|e| format!("openat: {e}"))?;
        self.stat(d.0, name).map(|st| attr_of(&st)).map_err(|e| format!("fstatat: {e}"))
    }
    fn access(&self, path: &str) -> Result<bool, String> {
        match self.execute(&Request::Access { path: path.into() }) {
            Ok(_) => Ok(true),
            Err(e) if e == "EACCES" => Ok(false),
            Err(e) => Err(format!("faccessat: {e}")),
        }
    }
    fn rename(&self, from: &str, to: &str) -> Result<(), String> {
        self.execute(&Request::Rename { from: from.into(), to: to.into() }).map(|_| ()).map_err(|e| format!("renameat: {e}"))
    }
    fn link(&self, from: &str, to: &str) -> Result<(), String> {
        self.execute(&Request::Link { from: from.into(), to: to.into() }).map(|_| ()).map_err(|e| format!("linkat: {e}"))
    }
    fn symlink(&self, path: &str, points_to: &str) -> Result<(), String> {
        self.execute(&Request::Symlink { path: path.into(), points_to: points_to.into() }).map(|_| ()).map_err(|e| format!("symlinkat: {e}"))
    }
    fn readlink(&self, path: &str) -> Result<String, String> {
        let mut buf = [0u8; 4096];
        let n = unsafe { libc::readlinkat(self.root(), cstr(path).as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
        let n = check(n as libc::c_long).map_err(|e| format!("readlinkat: {e}"))?;
        Ok(String::from_utf8_lossy(&buf[..n as usize]).into_owned())
    }
    fn readdir(&self, path: &str, plus: bool) -> Result<Vec<String>, String> {
        self.execute(&Request::Readdir { path: path.into(), plus }).map_err(|e| format!("getdents64: {e}"))?;
        let full = format!("{}/{}", self.root_path(), path);
        let names = std::fs::read_dir(&full).map_err(|e| format!("readdir: {e}"))?;
        Ok(names.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
    }
    fn remove(&self, path: &str) -> Result<(), String> {
        self.execute(&Request::Remove { path: path.into() }).map(|_| ()).map_err(|e| format!("unlinkat: {e}"))
    }
    fn rmdir(&self, path: &str) -> Result<(), String> {
        self.execute(&Request::Rmdir { path: path.into() }).map(|_| ()).map_err(|e| format!("unlinkat(AT_REMOVEDIR): {e}"))
    }
    fn fsstat(&self) -> Result<String, String> {
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatvfs(self.root(), &mut st) } as libc::c_long).map_err(|e| format!("fstatvfs: {e}"))?;
        let f = st.f_frsize as u64;
        Ok(format!("{} of {} bytes free, {} of {} files free", st.f_bavail as u64 * f, st.f_blocks as u64 * f, st.f_ffree, st.f_files))
    }
    fn fsinfo(&self) -> Result<String, String> {
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatvfs(self.root(), &mut st) } as libc::c_long).map_err(|e| format!("fstatvfs: {e}"))?;
        Ok(format!("block size {}, name max {}", st.f_bsize, st.f_namemax))
    }
    fn pathconf(&self) -> Result<String, String> {
        self.execute(&Request::Pathconf).map_err(|e| format!("fpathconf: {e}"))?;
        let n = unsafe { libc::fpathconf(self.root(), libc::_PC_NAME_MAX) };
        let l = unsafe { libc::fpathconf(self.root(), libc::_PC_LINK_MAX) };
        Ok(format!("name_max {n}, link_max {l}"))
    }
}

impl Posix {
    fn root_path(&self) -> String {
        // The root's own path, through /proc: the file-set root when one was entered.
        std::fs::read_link(format!("/proc/self/fd/{}", self.root())).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| self.base_path.clone())
    }
}
