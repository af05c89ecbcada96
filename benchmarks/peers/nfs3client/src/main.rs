//! nfs3client-bench HOST EXPORT OP CONNS SECONDS [FILE]
//! OP: null | getattr | read4k. $NFS_PORT: MOUNT and NFS on that port, no portmapper. Every connection runs its own closed loop (the crate
//! allows one request in flight per connection), all on one current-thread runtime,
//! so the client uses at most one core. Prints one JSON line.

use nfs3_client::nfs3_types::nfs3;
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::tokio::TokioConnector;
use nfs3_client::Nfs3ConnectionBuilder;
use std::time::{Duration, Instant};

fn cpu_s() -> f64 {
    let mut ru: libc_rusage = unsafe { std::mem::zeroed() };
    unsafe { getrusage(0, &mut ru) };
    ru.utime.0 as f64 + ru.utime.1 as f64 / 1e6 + ru.stime.0 as f64 + ru.stime.1 as f64 / 1e6
}

#[repr(C)]
struct libc_rusage {
    utime: (i64, i64),
    stime: (i64, i64),
    rest: [i64; 14],
}
extern "C" {
    fn getrusage(who: i32, usage: *mut libc_rusage) -> i32;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (host, export, op) = (a[1].clone(), a[2].clone(), a[3].clone());
    let conns: usize = a[4].parse().unwrap();
    let seconds: f64 = a[5].parse().unwrap();
    let file = a.get(6).cloned().unwrap_or_default();
    let cred = opaque_auth::auth_unix(&auth_unix { stamp: 1, machinename: Opaque::borrowed(b"bench"), uid: 0, gid: 0, gids: vec![] });
    let mut tasks = Vec::new();
    let start_line = std::sync::Arc::new(tokio::sync::Barrier::new(conns));
    for _ in 0..conns {
        let mut builder = Nfs3ConnectionBuilder::new(TokioConnector, host.clone(), export.clone())
            .connect_from_privileged_port(false)
            .credential(cred.clone());
        if let Some(port) = std::env::var("NFS_PORT").ok().and_then(|p| p.parse().ok()) {
            builder = builder.mount_port(port).nfs3_port(port); // no portmapper (rpc-responder)
        }
        let mut c = builder.mount().await.expect("mount");
        let root = c.root_nfs_fh3();
        let fh = if file.is_empty() {
            root.clone()
        } else {
            let args = nfs3::LOOKUP3args { what: nfs3::diropargs3 { dir: root.clone(), name: nfs3::filename3(Opaque::owned(file.as_bytes().to_vec())) } };
            match c.lookup(&args).await.expect("lookup") {
                nfs3::LOOKUP3res::Ok(ok) => ok.object,
                nfs3::LOOKUP3res::Err((e, _)) => panic!("lookup {file}: {e:?}"),
            }
        };
        let (op, barrier) = (op.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let deadline = Instant::now() + Duration::from_secs_f64(seconds);
            let mut n = 0u64;
            while Instant::now() < deadline {
                match op.as_str() {
                    "null" => c.null().await.expect("null"),
                    "getattr" => {
                        let r = c.getattr(&nfs3::GETATTR3args { object: fh.clone() }).await.expect("getattr");
                        assert!(matches!(r, nfs3::GETATTR3res::Ok(_)));
                    }
                    "read4k" => {
                        let r = c.read(&nfs3::READ3args { file: fh.clone(), offset: (n % 256) * 4096, count: 4096 }).await.expect("read");
                        assert!(matches!(r, nfs3::READ3res::Ok(_)));
                    }
                    other => panic!("unknown op {other}"),
                }
                n += 1;
            }
            n
        }));
    }
    let (t0, c0) = (Instant::now(), cpu_s());
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("task");
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    println!("{{\"client\": \"nfs3_client\", \"op\": \"{op}\", \"connections\": {conns}, \"ops\": {total}, \"seconds\": {wall}, \"cpu_s\": {cpu}}}");
}

