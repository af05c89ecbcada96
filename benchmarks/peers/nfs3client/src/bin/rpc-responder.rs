//! rpc-responder [PORT [MANIFEST]]: a canned-reply MOUNT + NFSv3 server for client-bound benchmarks.
//! It does no file-system work: each call gets a fixed, well-formed reply (MNT, NULL,
//! GETATTR, LOOKUP, ACCESS, READ of zeros, FSSTAT, FSINFO, PATHCONF; NFS3ERR_NOTSUPP
//! for the rest), and all replies to the calls found in one read go out in one write,
//! so a client, not the server, is the bottleneck. Prints its port, then serves forever.
//! MANIFEST: a file served as `.peakbench-manifest.json` (LOOKUP and READ), so that
//! peakbench's engine finds a prepared file set; every other name is the same file.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

fn u32s(out: &mut Vec<u8>, v: &[u32]) {
    for x in v {
        out.extend_from_slice(&x.to_be_bytes());
    }
}

fn fattr(out: &mut Vec<u8>, dir: bool) {
    u32s(out, &[if dir { 2 } else { 1 }, if dir { 0o755 } else { 0o644 }, 1, 0, 0]);
    u32s(out, &[0, 1 << 20, 0, 1 << 20, 0, 0, 0, 1, 0, if dir { 1 } else { 2 }]); // size used rdev fsid fileid
    u32s(out, &[0; 6]); // atime mtime ctime
}

fn word(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

static MANIFEST: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

fn reply(call: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]); // record mark, filled below
    let (xid, prog, proc_) = (word(call, 0), word(call, 12), word(call, 20));
    u32s(out, &[xid, 1, 0, 0, 0, 0]);
    // Arguments start after the credential and the verifier.
    let mut at = 24;
    for _ in 0..2 {
        at += 8 + (word(call, at + 4) as usize + 3) / 4 * 4;
    }
    let fh_len = word(call, at) as usize;
    let fh = call.get(at + 4..at + 4 + fh_len.min(64)).unwrap_or(&[]);
    let is_root = fh == b"rootfh00";
    let after_fh = at + 4 + (fh_len + 3) / 4 * 4;
    match (prog, proc_) {
        (100005, 1) => {
            u32s(out, &[0, 8]);
            out.extend_from_slice(b"rootfh00");
            u32s(out, &[1, 1]);
        }
        (100005, 5) => {
            u32s(out, &[1, 7]);
            out.extend_from_slice(b"/export\0");
            u32s(out, &[0, 0]);
        }
        (100005, _) | (100003, 0) => {}
        (100003, 1) => {
            u32s(out, &[0]);
            fattr(out, is_root);
        }
        (100003, 3) => {
            let name_len = word(call, after_fh) as usize;
            let name = call.get(after_fh + 4..after_fh + 4 + name_len).unwrap_or(&[]);
            let manifest = name == b".peakbench-manifest.json";
            if manifest && MANIFEST.get().is_none() {
                u32s(out, &[2, 0]); // NFS3ERR_NOENT
                let len = (out.len() - start - 4) as u32;
                out[start..start + 4].copy_from_slice(&(0x8000_0000 | len).to_be_bytes());
                return;
            }
            u32s(out, &[0, 8]);
            out.extend_from_slice(if manifest { b"manifest" } else { b"file0000" });
            u32s(out, &[1]);
            fattr(out, false);
            u32s(out, &[0]);
        }
        (100003, 4) => u32s(out, &[0, 0, word(call, after_fh)]),
        (100003, 6) if fh == b"manifest" => {
            let data = MANIFEST.get().map_or(&[][..], |m| &m[..]);
            let offset = (word(call, after_fh) as usize) << 32 | word(call, after_fh + 4) as usize;
            let want = word(call, after_fh + 8) as usize;
            let part = &data[offset.min(data.len())..(offset + want).min(data.len())];
            u32s(out, &[0, 0, part.len() as u32, (offset + part.len() >= data.len()) as u32, part.len() as u32]);
            out.extend_from_slice(part);
            out.resize(out.len() + (4 - part.len() % 4) % 4, 0);
        }
        (100003, 6) => {
            let count = word(call, after_fh + 8).min(1 << 20);
            u32s(out, &[0, 0, count, 0, count]);
            out.resize(out.len() + (count as usize + 3) / 4 * 4, 0);
        }
        (100003, 18) => {
            u32s(out, &[0, 0]);
            u32s(out, &[0, 1 << 30, 0, 1 << 29, 0, 1 << 29, 0, 1 << 20, 0, 1 << 19, 0, 1 << 19, 0]);
        }
        (100003, 19) => {
            u32s(out, &[0, 0, 1 << 20, 1 << 20, 4096, 1 << 20, 1 << 20, 4096, 8192, 0xffff_ffff, 0xffff_ffff, 0, 1, 0x1b]);
        }
        (100003, 20) => u32s(out, &[0, 0, 32000, 255, 1, 1, 0, 1]),
        _ => u32s(out, &[10004, 0, 0, 0, 0]),
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&(0x8000_0000 | len).to_be_bytes());
}

fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 1 << 20];
    let (mut start, mut end) = (0usize, 0usize);
    let mut out = Vec::with_capacity(1 << 20);
    loop {
        if start == end {
            start = 0;
            end = 0;
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let n = match s.read(&mut buf[end..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        end += n;
        out.clear();
        while end - start >= 4 {
            let len = (word(&buf, start) & 0x7fff_ffff) as usize;
            if len > buf.len() - 4 {
                return;
            }
            if end - start - 4 < len {
                break;
            }
            reply(&buf[start + 4..start + 4 + len], &mut out);
            start += 4 + len;
        }
        if !out.is_empty() && s.write_all(&out).is_err() {
            return;
        }
    }
}

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    if let Some(path) = std::env::args().nth(2) {
        MANIFEST.set(std::fs::read(&path).expect("read the manifest")).ok();
    }
    let l = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    println!("{}", l.local_addr().expect("addr").port());
    std::io::stdout().flush().ok();
    for s in l.incoming().flatten() {
        std::thread::spawn(move || serve(s));
    }
}
