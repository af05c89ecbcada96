//! peakbench-engine: one TrialSpec in (file or stdin), one JSON result out on stdout,
//! progress as JSON lines on stderr. It never decides what to run next.

mod clock;
mod content;
mod dialect;
#[cfg(test)]
mod fuzz;
mod hist;
mod interrupt;
mod op;
mod pacer;
mod prepare;
mod progress;
mod record;
mod replay;
mod result;
mod spec;
mod start;
mod target;
mod trial;
mod url;
mod validate;
mod workload;

use std::io::{Read, Write};
use std::process::ExitCode;

const USAGE: &str =
    "usage: peakbench-engine (run|prepare|validate-spec) SPEC.json|-\n       peakbench-engine generate SPEC.json|- N\n       peakbench-engine validate-target TARGET.json|-\n       peakbench-engine --version";

/// Exit 2: the spec is wrong. Exit 1: the spec is fine but the trial could not run.
enum Failure {
    Spec(String),
    Run(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("peakbench-engine {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    // `generate` alone takes a third argument: how many requests.
    let count = match (args.first().map(String::as_str), args.get(2).map(|n| n.parse::<u64>())) {
        (Some("generate"), Some(Ok(n))) if args.len() == 3 => Some(n),
        _ => None,
    };
    let (Some(command), Some(source), 2 | 3) = (args.first(), args.get(1), args.len()) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if (command == "generate") != count.is_some() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    watch_parent();
    match execute(command, source, count.unwrap_or(0)) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(result)) => {
            println!("{result}");
            ExitCode::SUCCESS
        }
        Err(Failure::Spec(msg)) => {
            eprintln!("{msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(msg)) => {
            eprintln!("{msg}");
            ExitCode::from(1)
        }
    }
}

/// How often the engine checks that its controller still lives.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The engine dies with its controller: a killed controller must not leave an orphan loading the
/// target (a resumed plan would start a second one beside it). PR_SET_PDEATHSIG would fire when
/// the *thread* that started the engine ends, and controllers start engines from worker threads
/// (Dask, progress displays), so a thread polls the parent's pid instead, for every command.
fn watch_parent() {
    let parent = unsafe { libc::getppid() };
    if parent <= 1 {
        return; // already orphaned (or started by init): nothing to watch
    }
    std::thread::spawn(move || loop {
        std::thread::sleep(PARENT_POLL);
        if unsafe { libc::getppid() } != parent {
            // Not eprintln!: the controller's end of the pipe is usually gone, and it would panic.
            let _ = writeln!(std::io::stderr(), "the controller (pid {parent}) is gone; the engine stops");
            std::process::exit(1);
        }
    });
}

fn execute(command: &str, source: &str, count: u64) -> Result<Option<serde_json::Value>, Failure> {
    let label = if source == "-" { "<stdin>" } else { source };
    let text = if source == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(source)
    }
    .map_err(|e| Failure::Spec(format!("{label}: {e}")))?;
    let run = |e: anyhow::Error| {
        if e.chain().any(|cause| cause.is::<replay::BadLog>() || cause.is::<target::smb::Refused>()) {
            Failure::Spec(format!("{e:#}"))
        } else {
            Failure::Run(format!("{e:#}"))
        }
    };
    if command == "validate-target" {
        let target: spec::TargetSpec = serde_json::from_str(&text).map_err(|e| Failure::Spec(format!("{label}: {e}")))?;
        return target::validate(&target).map(Some).map_err(run);
    }
    let spec = spec::parse(&text).map_err(|e| Failure::Spec(format!("{label}: {e}")))?;
    match command {
        "validate-spec" => Ok(None),
        "generate" => workload::markov::sample(&spec, count).map(Some).map_err(|e| Failure::Spec(format!("{label}: {e:#}"))),
        "prepare" => {
            let mut target = target::open(&spec.target).map_err(run)?;
            let where_ = match &spec.target {
                spec::TargetSpec::Posix { path, .. } => path.clone(),
                spec::TargetSpec::Null => "null://".into(),
                spec::TargetSpec::Nfs(n) => target::nfs::Nfs::url_of(n),
                spec::TargetSpec::Smb(s) => target::smb::Smb::url_of(s),
                spec::TargetSpec::Http { url, docroot, .. } => docroot.clone().unwrap_or_else(|| url.clone()),
            };
            prepare::prepare(&spec, target.as_mut(), &where_).map(Some).map_err(run)
        }
        "run" => {
            interrupt::install();
            let target = target::open(&spec.target).map_err(run)?;
            // Through a Value, whose sorted keys keep the printed bytes as they were before the struct.
            trial::run(&spec, target).map(|r| Some(serde_json::to_value(r).expect("a TrialResult serialises"))).map_err(run)
        }
        other => Err(Failure::Spec(format!("unknown command {other:?}\n{USAGE}"))),
    }
}
