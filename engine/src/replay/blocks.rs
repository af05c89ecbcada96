//! The log read in blocks of whole lines, each block parsed on whichever core is free,
//! the results handed back in log order: the trace comes out as a line-by-line read
//! would build it, line numbers and all, while every core parses.

use super::clf;
use super::format::Format;
use super::intern::{fingerprint, Interner, Numbers};
use super::structure::Index;
use super::Skipped;
use crate::spec::ReplaySpec;
use anyhow::Context;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{mpsc, Mutex};

/// Bytes read per block: some 20,000 lines, many against the cost of passing a block
/// between threads, few enough that the blocks in flight (two per worker) stay small.
pub const BLOCK_BYTES: usize = 2 << 20;

/// Distinct targets a worker keeps numbering across the blocks it parses, so that the
/// merge interns each target once per worker rather than once per block; the bound
/// keeps a worker's table to some tens of MiB in a log of millions of distinct URLs.
pub const WORKER_TARGETS: usize = 1 << 18;

/// One block's lines, parsed by one worker, numbered from the block's first line and
/// by the worker's table of targets.
#[derive(Default)]
pub struct Parsed {
    pub worker: usize,
    /// The block's length in bytes of log text.
    pub bytes: usize,
    pub lines: u64,
    /// Line numbers in `examples` count from the block's first line (1).
    pub skipped: Skipped,
    /// The worker's table was full: it started again from empty with this block.
    pub fresh: bool,
    /// Targets new to the worker's table, in the order it numbered them.
    pub new_targets: Interner,
    /// (target, bytes) where a 200 GET served more than the worker had seen of it.
    pub served: Vec<(u32, u64)>,
    /// Per replayable request: its target's number in the worker's table << 1 | 1 for HEAD.
    pub requests: Vec<u32>,
    /// Per replayable request: seconds since the epoch (0 when the format has no time).
    pub times: Vec<i64>,
}

/// The log's text, and its length in bytes when that is known before reading it (a plain file,
/// not a pipe or a gzip stream).
fn open_log(path: &str) -> anyhow::Result<(Box<dyn Read + Send>, Option<u64>)> {
    let mut file = std::fs::File::open(path).with_context(|| format!("access log {path}"))?;
    let plain_length = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).with_context(|| format!("access log {path}"))?;
    // Put the bytes read back in front (the log may be a pipe, which cannot seek).
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        (Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, head))), None)
    } else {
        (Box::new(head), plain_length)
    })
}

/// One worker per core, but no more than the log has blocks: a short log (a test's, a
/// single replayed URL) is parsed without starting threads that would find nothing to do.
fn parse_workers(cores: usize, plain_length: Option<u64>, block_bytes: usize) -> usize {
    match plain_length {
        Some(length) => cores.min(length.div_ceil(block_bytes as u64).max(1) as usize),
        None => cores,
    }
}

/// Parse the log in `spec` on every core, calling `merge` with each block's result in
/// log order (on the calling thread). At most two blocks per worker are in memory.
pub fn parse_log(
    spec: &ReplaySpec,
    format: &Format,
    (block_bytes, table_limit): (usize, usize),
    mut merge: impl FnMut(Parsed) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (reader, plain_length) = open_log(&spec.log)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = parse_workers(cores, plain_length, block_bytes);
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..2 * workers {
        free_tx.send(Vec::new()).expect("the receiver is here");
    }
    let (work_tx, work_rx) = mpsc::channel::<(usize, Vec<u8>)>();
    let work_rx = Mutex::new(work_rx);
    // Unbounded, so a worker never waits on the merge while the merge waits on a block
    // another worker holds; the free buffers bound what is in flight.
    let (done_tx, done_rx) = mpsc::channel::<(usize, Parsed, Vec<u8>)>();
    std::thread::scope(|scope| {
        let reading = scope.spawn(move || read_blocks(reader, block_bytes, free_rx, work_tx));
        for worker in 0..workers {
            let (done_tx, work_rx) = (done_tx.clone(), &work_rx);
            let (mut known, mut index) = (Numbers::default(), Index::default());
            scope.spawn(move || loop {
                let next = work_rx.lock().expect("a worker panicked").recv();
                let Ok((order, data)) = next else { break };
                let parsed = parse_block(format, spec, &data, &mut index, worker, &mut known, table_limit);
                if done_tx.send((order, parsed, data)).is_err() {
                    break;
                }
            });
        }
        drop(done_tx);
        let (mut lines, mut next) = (0u64, 0usize);
        let mut waiting = BTreeMap::new();
        for (index, parsed, data) in done_rx {
            waiting.insert(index, (parsed, data));
            while let Some((parsed, data)) = waiting.remove(&next) {
                next += 1;
                lines += parsed.lines;
                // The reader may have stopped on an error: then nobody takes the buffer.
                let _ = free_tx.send(data);
                merge(parsed)?;
            }
        }
        drop(free_tx);
        match reading.join().expect("the log reader panicked") {
            Ok(()) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("access log {}: after line {lines}", spec.log)),
        }
    })
}

/// Read blocks that end at a line's end into buffers from `free`, numbered in log order,
/// until the log ends (or the merge stops taking them).
fn read_blocks(mut log: Box<dyn Read + Send>, block_bytes: usize, free: mpsc::Receiver<Vec<u8>>, work: mpsc::Sender<(usize, Vec<u8>)>) -> std::io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    for index in 0.. {
        let Ok(mut block) = free.recv() else { return Ok(()) };
        block.clear();
        block.extend_from_slice(&carry);
        carry.clear();
        // A line longer than a block makes the block longer.
        let mut searched = 0;
        let (cut, at_end) = loop {
            let want = block_bytes.max(block.len() + 1) - block.len();
            block.reserve_exact(want);
            if (&mut log).take(want as u64).read_to_end(&mut block)? < want {
                break (block.len(), true);
            }
            if let Some(nl) = memchr::memrchr(b'\n', &block[searched..]) {
                break (searched + nl + 1, false);
            }
            searched = block.len();
        };
        carry.extend_from_slice(&block[cut..]);
        block.truncate(cut);
        if !block.is_empty() && work.send((index, block)).is_err() {
            return Ok(());
        }
        if at_end {
            return Ok(());
        }
    }
    unreachable!("a log of more than usize::MAX blocks")
}

/// Split a block into lines and parse each: counts of what was skipped and why, and
/// the replayable requests against the worker's table of targets (`known`, which
/// starts again from empty when it holds `table_limit` targets; its value of a target is
/// the largest 200 GET of it). `index` is the worker's, reused from block to block.
fn parse_block(format: &Format, spec: &ReplaySpec, data: &[u8], index: &mut Index, worker: usize, known: &mut Numbers, table_limit: usize) -> Parsed {
    // Room for a request per 64 bytes: pages never written are never touched, and
    // growing by doubling would copy.
    let room = data.len() / 64;
    let mut p = Parsed { worker, bytes: data.len(), requests: Vec::with_capacity(room), times: Vec::with_capacity(room), ..Parsed::default() };
    if known.len() >= table_limit {
        *known = Numbers::default();
        p.fresh = true;
    }
    let mut last_time = clf::LastTime::default();
    let mut batch = Vec::with_capacity(BATCH);
    index.build(data);
    let mut lines = index.lines();
    while let Some(line) = lines.next(data) {
        p.lines += 1;
        let scanned = format.layout.and_then(|layout| clf::scan(data, index, &line, layout, &mut last_time));
        let fields = match scanned {
            Some(fields) => fields,
            None => {
                let text = &data[line.start..line.end];
                if text.iter().all(|c| c.is_ascii_whitespace()) {
                    p.skipped.blank += 1;
                    continue;
                }
                match format.parse_line(text).and_then(|entry| entry.fields()) {
                    Ok(fields) => fields,
                    Err(why) => {
                        p.skipped.unparseable(p.lines, why, text, spec.examples);
                        continue;
                    }
                }
            }
        };
        let head = match fields.method {
            b"GET" => false,
            b"HEAD" => true,
            _ => {
                p.skipped.method += 1;
                continue;
            }
        };
        let status = fields.status;
        if !((200..300).contains(&status) || status == 304 || spec.all_statuses) {
            p.skipped.status += 1;
            continue;
        }
        let target = strip_origin(fields.target);
        let fingerprint = fingerprint(&target);
        known.prefetch(fingerprint);
        batch.push(Request { target, fingerprint, head, size: if status == 200 && !head { fields.bytes } else { 0 }, time: fields.time });
        if batch.len() == BATCH {
            count(&mut batch, known, &mut p);
        }
    }
    count(&mut batch, known, &mut p);
    p
}

/// Requests whose targets are looked up together: each lookup's cache misses (its slot,
/// then its largest size) are asked for a few lines ahead.
const BATCH: usize = 16;

/// A replayable request awaiting its target's number.
struct Request<'a> {
    target: Cow<'a, [u8]>,
    fingerprint: u128,
    head: bool,
    /// Bytes served by a 200 GET, else 0.
    size: u64,
    time: i64,
}

/// Number the targets of `batch` by the worker's table and add its requests to `p`.
fn count(batch: &mut Vec<Request>, known: &mut Numbers, p: &mut Parsed) {
    let mut numbers = [0u32; BATCH];
    for (r, number) in batch.iter().zip(&mut numbers) {
        let new;
        (*number, new) = known.number(r.fingerprint);
        if new {
            p.new_targets.insert(&r.target, r.fingerprint as u64);
        }
        known.prefetch_largest(*number);
    }
    for (r, &number) in batch.drain(..).zip(&numbers) {
        if known.raise(number, r.size) {
            p.served.push((number, r.size));
        }
        p.requests.push(number << 1 | r.head as u32);
        p.times.push(r.time);
    }
}

/// An absolute-form target (a proxy's log): keep the path.
fn strip_origin(target: Cow<[u8]>) -> Cow<[u8]> {
    if !(target.starts_with(b"http://") || target.starts_with(b"https://")) {
        return target;
    }
    let path_at = target.iter().skip(8).position(|&c| c == b'/').map(|i| i + 8);
    match (target, path_at) {
        (Cow::Borrowed(t), Some(i)) => Cow::Borrowed(&t[i..]),
        (Cow::Owned(t), Some(i)) => Cow::Owned(t[i..].to_vec()),
        (_, None) => Cow::Borrowed(b"/"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_workers;

    #[test]
    fn a_log_shorter_than_a_block_is_parsed_by_one_worker_and_a_long_one_by_every_core() {
        // A one-line log took a reader and a worker per core, threads an overloaded HTTP run was
        // counted with (tests/test_http_loop.py).
        assert_eq!(parse_workers(8, Some(70), 2 << 20), 1);
        assert_eq!(parse_workers(8, Some(0), 2 << 20), 1);
        assert_eq!(parse_workers(8, Some(3 * (2 << 20) - 1), 2 << 20), 3);
        assert_eq!(parse_workers(8, Some(100 << 20), 2 << 20), 8);
        // A pipe or a gzip stream: its length is unknown until read.
        assert_eq!(parse_workers(8, None, 2 << 20), 8);
    }
}
