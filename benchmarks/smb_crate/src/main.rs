//! The pure-Rust `smb` crate's client cost per op against Samba: C tasks (tokio, one core)
//! each looping over one op for T seconds, then ops/s and client CPU µs per op
//! (utime + stime of this process, from /proc/self/stat). peakbench's engine is measured
//! the same way in benchmarks/smb_client_cpu.py; BENCHMARKS.md compares the two.
//!
//! usage: smb-crate-probe HOST:PORT SHARE USER PASSWORD OP(read4k|getattr) TASKS SECONDS

use smb::{Client, ClientConfig, FileAccessMask, FileCreateArgs, UncPath};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat.rsplit_once(')').expect("comm").1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [addr, share, user, password, op, tasks, seconds] = &a[..] else {
        eprintln!("usage: smb-crate-probe HOST:PORT SHARE USER PASSWORD read4k|getattr TASKS SECONDS");
        std::process::exit(2);
    };
    let (tasks, seconds): (usize, f64) = (tasks.parse()?, seconds.parse()?);
    let client = Arc::new(Client::new(ClientConfig::default()));
    let host = addr.split(':').next().unwrap().to_string();
    client.connect_to_address(&host, addr.parse()?).await?;
    let root = UncPath::from_str(&format!(r"\\{host}\{share}"))?;
    client.share_connect(&root, user, password.clone()).await?;
    let path = root.clone().with_path("probe.dat");
    let file = Arc::new(
        client.create_file(&path, &FileCreateArgs::make_open_existing(FileAccessMask::new().with_generic_read(true))).await?.unwrap_file(),
    );
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (client, file, path, done, op) = (client.clone(), file.clone(), path.clone(), done.clone(), op.clone());
        handles.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while Instant::now() < stop {
                if op == "read4k" {
                    file.read_block(&mut buf, 0, None, false).await.expect("read");
                } else {
                    let args = FileCreateArgs::make_open_existing(FileAccessMask::new().with_file_read_attributes(true));
                    let r = client.create_file(&path, &args).await.expect("create");
                    let _: smb::FileBasicInformation = r.as_file().expect("a file").query_info().await.expect("query");
                    r.as_file().unwrap().close().await.expect("close");
                }
                done.fetch_add(1, Relaxed);
            }
        }));
    }
    for h in handles {
        h.await?;
    }
    let (cpu, wall, n) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64(), done.load(Relaxed) as f64);
    println!("{{\"client\": \"smb crate 0.11\", \"op\": \"{op}\", \"tasks\": {tasks}, \"ops\": {n}, \"ops_per_s\": {:.1}, \"cpu_us_per_op\": {:.2}}}", n / wall, cpu / n * 1e6);
    Ok(())
}
