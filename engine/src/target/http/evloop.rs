//! The HTTP target's event loop: non-blocking keep-alive connections on one epoll set, driven
//! by the sender that holds the lead (Target::poll), so requests in flight cost a connection
//! and a buffer each, not a thread. One request per connection at a time (no pipelining); a
//! request finding every connection busy and the connection limit reached waits in a queue.

use super::tls::{Stream, Tls};
use super::wire::{Conn, Outgoing, Reply, Step};
use super::{io_kind, Response, Then};
use crate::target::Completion;
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A request on its way: its bytes, its reply so far, and what to call with the outcome.
pub struct Job {
    out: Outgoing,
    method: &'static str,
    reply: Reply,
    then: Then,
    done: Completion,
    deadline: Instant,
    /// Already retried once on a fresh connection.
    retried: bool,
}

impl Job {
    pub fn new(out: Outgoing, method: &'static str, then: Then, done: Completion) -> Job {
        Job { out, method, reply: Reply::new(method, false), then, done, deadline: Instant::now(), retried: false }
    }
}

struct Slot {
    /// Bumped when the slot gets a new connection, so an event for the old one is ignored.
    generation: u32,
    conn: Option<Conn<Stream>>,
    job: Option<Job>,
    connecting: bool,
    /// Registered for EPOLLOUT too (connecting, or a request that did not fit the socket).
    writing: bool,
    /// The connection carried a request before (a failure before any reply byte may be a
    /// kept-alive connection the server closed while idle: that request is retried once).
    reused: bool,
}

pub struct EventLoop {
    epoll: OwnedFd,
    addr: SocketAddr,
    /// https: each new connection is wrapped in TLS.
    tls: Option<Tls>,
    timeout: Duration,
    slots: Vec<Slot>,
    free: Vec<usize>,
    idle: Vec<usize>,
    queued: VecDeque<Job>,
    /// (deadline, slot, generation) of every request sent, oldest first (one timeout for all).
    deadlines: VecDeque<(Instant, usize, u32)>,
    open: usize,
    max_open: usize,
    events: Vec<libc::epoll_event>,
    /// The kernel has epoll_pwait2 (Linux 5.11 and later); else epoll_wait, in whole milliseconds.
    pwait2: bool,
    /// The most connections open at once, and the requests that waited for one (result fields).
    pub peak_open: usize,
    pub waited: u64,
}

const LIVE: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

impl EventLoop {
    pub fn new(addr: SocketAddr, tls: Option<Tls>, timeout: Duration, max_open: usize) -> std::io::Result<EventLoop> {
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(EventLoop {
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
            addr,
            tls,
            timeout,
            slots: Vec::new(),
            free: Vec::new(),
            idle: Vec::new(),
            queued: VecDeque::new(),
            deadlines: VecDeque::new(),
            open: 0,
            max_open,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 256],
            pwait2: true,
            peak_open: 0,
            waited: 0,
        })
    }

    /// Send a request on an idle connection, a new one, or queue it for the next one free.
    pub fn submit(&mut self, job: Job, content: &[u8]) {
        if let Some(i) = self.idle.pop() {
            self.slots[i].reused = true;
            self.assign(i, job, content);
        } else if self.open < self.max_open {
            self.connect(job, content);
        } else {
            self.waited += 1;
            self.queued.push_back(job);
        }
    }

    /// Handle what is ready, waiting up to `timeout` for the first event; then time out
    /// requests past their deadline.
    pub fn poll(&mut self, timeout: Duration, content: &[u8]) {
        let now = Instant::now();
        let wait = match self.deadlines.front() {
            Some(&(deadline, ..)) => timeout.min(deadline.saturating_duration_since(now)),
            None => timeout,
        };
        let n = self.wait(wait);
        for k in 0..n {
            let event = self.events[k];
            let (i, generation) = ((event.u64 & 0xffff_ffff) as usize, (event.u64 >> 32) as u32);
            if self.slots[i].generation == generation && self.slots[i].conn.is_some() {
                self.ready(i, event.events, content);
            }
        }
        if self.deadlines.front().is_some_and(|&(deadline, ..)| deadline <= Instant::now()) {
            self.expire(content);
        }
    }

    /// epoll_pwait2: a timeout in nanoseconds, so a sender waiting for its next due time
    /// still sees each reply as it arrives.
    fn wait(&mut self, timeout: Duration) -> usize {
        let (epoll, events, room) = (self.epoll.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as libc::c_int);
        if !self.pwait2 {
            let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
            return unsafe { libc::epoll_wait(epoll, events, room, ms) }.max(0) as usize;
        }
        let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
        let n = unsafe { libc::syscall(libc::SYS_epoll_pwait2, epoll, events, room, &ts as *const libc::timespec, std::ptr::null::<libc::sigset_t>(), 0usize) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            self.pwait2 = false;
            return self.wait(timeout);
        }
        n.max(0) as usize // EINTR: the caller polls again
    }

    fn ctl(&self, op: libc::c_int, i: usize, events: u32) {
        let slot = &self.slots[i];
        let fd = slot.conn.as_ref().expect("a connection").stream.tcp().as_raw_fd();
        let mut event = libc::epoll_event { events, u64: (slot.generation as u64) << 32 | i as u64 };
        // Fails only for a bad descriptor or no memory; the request's deadline then ends it.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut event) };
    }

    fn connect(&mut self, job: Job, content: &[u8]) {
        let opened = connect_nonblocking(&self.addr).and_then(|(tcp, connecting)| match &self.tls {
            Some(tls) => Ok((tls.wrap(tcp)?, connecting)),
            None => Ok((Stream::Plain(tcp), connecting)),
        });
        let (stream, connecting) = match opened {
            Ok(c) => c,
            Err(e) => return (job.done)(job.then.outcome(Err(io_kind(&e))), 0),
        };
        let i = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot { generation: 0, conn: None, job: None, connecting: false, writing: false, reused: false });
            self.slots.len() - 1
        });
        let slot = &mut self.slots[i];
        slot.generation = slot.generation.wrapping_add(1);
        slot.conn = Some(Conn::new(stream));
        (slot.connecting, slot.writing, slot.reused) = (connecting, connecting, false);
        self.open += 1;
        self.peak_open = self.peak_open.max(self.open);
        self.ctl(libc::EPOLL_CTL_ADD, i, if connecting { LIVE | libc::EPOLLOUT as u32 } else { LIVE });
        self.assign(i, job, content);
    }

    fn assign(&mut self, i: usize, mut job: Job, content: &[u8]) {
        job.deadline = Instant::now() + self.timeout;
        self.deadlines.push_back((job.deadline, i, self.slots[i].generation));
        self.slots[i].job = Some(job);
        if !self.slots[i].connecting {
            self.send(i, content);
        }
    }

    fn send(&mut self, i: usize, content: &[u8]) {
        let slot = &mut self.slots[i];
        let (Some(conn), Some(job)) = (slot.conn.as_mut(), slot.job.as_mut()) else { return };
        match job.out.write_to(&mut conn.stream, content) {
            Ok(all_out) if all_out == slot.writing => {
                slot.writing = !all_out;
                self.ctl(libc::EPOLL_CTL_MOD, i, if all_out { LIVE } else { LIVE | libc::EPOLLOUT as u32 });
            }
            Ok(_) => {}
            Err(e) => self.fail(i, io_kind(&e), true, content),
        }
    }

    fn ready(&mut self, i: usize, events: u32, content: &[u8]) {
        let slot = &mut self.slots[i];
        if slot.connecting {
            if events & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                return;
            }
            slot.connecting = false;
            let stream = slot.conn.as_ref().expect("a connection").stream.tcp();
            if let Some(e) = stream.take_error().unwrap_or_else(Some) {
                return self.fail(i, io_kind(&e), true, content);
            }
            return self.send(i, content);
        }
        if slot.writing && events & libc::EPOLLOUT as u32 != 0 {
            self.send(i, content);
        }
        if events & (LIVE | (libc::EPOLLERR | libc::EPOLLHUP) as u32) != 0 {
            self.receive(i, content);
        }
    }

    fn receive(&mut self, i: usize, content: &[u8]) {
        if self.slots[i].job.is_none() {
            // An idle connection is readable: the server closed it (or sent what nobody asked for).
            self.idle.retain(|&j| j != i);
            return self.close(i, content);
        }
        let slot = &mut self.slots[i];
        let (Some(conn), Some(job)) = (slot.conn.as_mut(), slot.job.as_mut()) else { return };
        loop {
            let eof = match conn.fill() {
                Ok(n) => n == 0,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    let untouched = job.reply.untouched(conn);
                    return self.fail(i, io_kind(&e), untouched, content);
                }
            };
            match job.reply.advance(conn, eof) {
                Ok(Step::More) => {}
                Ok(Step::Done(response, reusable)) => {
                    let reusable = reusable && !conn.has_unread();
                    return self.complete(i, response, reusable, content);
                }
                Err(e) => {
                    let untouched = job.reply.untouched(conn);
                    return self.fail(i, e, untouched, content);
                }
            }
        }
    }

    fn complete(&mut self, i: usize, response: Response, reusable: bool, content: &[u8]) {
        let job = self.slots[i].job.take().expect("a request");
        (job.done)(job.then.outcome(Ok(response)), 0);
        if !reusable {
            return self.close(i, content);
        }
        match self.queued.pop_front() {
            Some(next) => {
                self.slots[i].reused = true;
                self.assign(i, next, content);
            }
            None => self.idle.push(i),
        }
    }

    /// The request on slot `i` failed: retried once on a fresh connection when a kept-alive
    /// connection failed before any reply byte (as every HTTP client does; a timeout is not).
    fn fail(&mut self, i: usize, e: String, untouched: bool, content: &[u8]) {
        let slot = &mut self.slots[i];
        let mut job = slot.job.take().expect("a request");
        let stale = slot.reused && untouched && matches!(e.as_str(), "http_eof" | "ECONNRESET" | "EPIPE" | "ECONNABORTED");
        self.close(i, content);
        if stale && !job.retried {
            job.retried = true;
            job.out.rewind();
            job.reply = Reply::new(job.method, false);
            self.submit(job, content);
        } else {
            (job.done)(job.then.outcome(Err(e)), 0);
        }
    }

    /// Close slot `i`'s connection; a queued request may now open one of its own.
    fn close(&mut self, i: usize, content: &[u8]) {
        let slot = &mut self.slots[i];
        slot.job = None;
        if slot.conn.take().is_some() {
            self.open -= 1;
            self.free.push(i);
        }
        if let Some(next) = self.queued.pop_front() {
            self.connect(next, content);
        }
    }

    fn expire(&mut self, content: &[u8]) {
        let now = Instant::now();
        while let Some(&(deadline, i, generation)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            let slot = &self.slots[i];
            if slot.generation == generation && slot.job.as_ref().is_some_and(|j| j.deadline == deadline) {
                self.fail(i, "ETIMEDOUT".into(), false, content);
            }
        }
    }
}

/// A TCP connection started without waiting: the stream and whether the connect is still under way.
fn connect_nonblocking(addr: &SocketAddr) -> std::io::Result<(TcpStream, bool)> {
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let (family, len) = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            (libc::AF_INET, std::mem::size_of::<libc::sockaddr_in>())
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (libc::AF_INET6, std::mem::size_of::<libc::sockaddr_in6>())
        }
    };
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    stream.set_nodelay(true)?;
    if unsafe { libc::connect(fd, &storage as *const _ as *const libc::sockaddr, len as libc::socklen_t) } == 0 {
        return Ok((stream, false));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok((stream, true))
    } else {
        Err(e)
    }
}
