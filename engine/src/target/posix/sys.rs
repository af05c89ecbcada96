//! System-call helpers of the posix target: C strings without allocation, errno names,
//! return-value checks, owned descriptors and the per-thread transfer buffer.

use std::cell::RefCell;
use std::ffi::CString;
use std::os::fd::RawFd;

/// Per-thread buffers up to this size are kept between ops; larger ones are allocated per op.
const KEEP_BUF: usize = 1 << 20;

/// A page-aligned buffer reused by one thread's transfers.
struct Buf {
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    const ALIGN: usize = 4096;
    fn alloc(len: usize) -> Buf {
        let layout = std::alloc::Layout::from_size_align(len.max(Self::ALIGN), Self::ALIGN).expect("buffer layout");
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Buf { ptr, len: len.max(Self::ALIGN) }
    }
    fn slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len);
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, Self::ALIGN).expect("buffer layout");
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

thread_local! {
    static BUF: RefCell<Option<Buf>> = const { RefCell::new(None) };
}

/// Run `f` on a buffer of at least `len` bytes: the thread's own up to KEEP_BUF, else a fresh one.
pub fn with_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    if len > KEEP_BUF {
        return f(Buf::alloc(len).slice(len));
    }
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.as_ref().is_none_or(|b| b.len < len) {
            *b = Some(Buf::alloc(len.next_power_of_two()));
        }
        f(b.as_mut().expect("buffer").slice(len))
    })
}

/// A path as a NUL-terminated C string, on the stack when short (no allocation per syscall).
pub fn with_cstr<R>(s: &str, f: impl FnOnce(*const libc::c_char) -> R) -> Result<R, String> {
    let b = s.as_bytes();
    if b.contains(&0) {
        return Err("EINVAL".into());
    }
    if b.len() < 256 {
        let mut buf = std::mem::MaybeUninit::<[u8; 256]>::uninit();
        let p = buf.as_mut_ptr() as *mut u8;
        // SAFETY: b.len() + 1 <= 256 bytes are written before the pointer is used.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
            *p.add(b.len()) = 0;
        }
        Ok(f(p as *const libc::c_char))
    } else {
        let c = cstr(s);
        Ok(f(c.as_ptr()))
    }
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).expect("generated paths contain no NUL")
}

pub fn errno() -> i32 {
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
pub fn check(ret: libc::c_long) -> Result<libc::c_long, String> {
    if ret < 0 {
        Err(errno_name(errno()))
    } else {
        Ok(ret)
    }
}

/// A descriptor closed when dropped.
pub struct Fd(pub RawFd);
impl Drop for Fd {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}
