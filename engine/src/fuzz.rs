//! Bounded random-input testing for the parsers that read what a server or a log wrote.
//! cargo-fuzz needs a nightly toolchain, which CI does not install; this runs on stable.
//! Each target is an `#[ignore]`d test beside its parser, run by `scripts/fuzz.sh` for
//! `PEAKBENCH_FUZZ_SECONDS` each: mutations of a small corpus of valid inputs, and random
//! bytes. A panic prints the input that caused it; an input that takes longer than
//! `SLOW` fails too (a hang is caught by the script's own time limit).

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

const SLOW: Duration = Duration::from_secs(1);
/// Inputs grow to at most this many bytes.
const MAX_LEN: usize = 64 * 1024;

/// Fragments that parsers treat specially: line and field ends, numbers at and past the
/// limits of their types, XDR lengths that point past the end.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b" ",
    b"\"",
    b"[",
    b"]",
    b"/",
    b"/..",
    b"%",
    b"%00",
    b"%2e",
    b"?",
    b"-",
    b"0",
    b"-1",
    b"999999999999",
    b"18446744073709551616",
    b"4294967295",
    b"ffffffffffffffff",
    b"HTTP/1.1 ",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked",
    b"\x00\x00\x00\x00",
    b"\x00\x00\x00\x01",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff",
];

/// How long each target runs: `PEAKBENCH_FUZZ_SECONDS` (5 s when unset).
fn budget() -> Duration {
    let seconds = std::env::var("PEAKBENCH_FUZZ_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(5.0);
    Duration::from_secs_f64(seconds.clamp(0.0, 86_400.0))
}

fn mutate(rng: &mut Pcg64, seeds: &[&[u8]], input: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..=8) {
        let at = rng.random_range(0..=input.len());
        match rng.random_range(0..8) {
            0 if at < input.len() => input[at] ^= 1 << rng.random_range(0..8),
            1 if at < input.len() => input[at] = rng.random(),
            2 => {
                let n = rng.random_range(1..=16);
                input.splice(at..at, (0..n).map(|_| rng.random::<u8>()));
            }
            3 if at < input.len() => {
                let end = rng.random_range(at..=input.len().min(at + 64));
                input.drain(at..end);
            }
            4 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                input.splice(at..at, token.iter().copied());
            }
            5 if at < input.len() => {
                // Repeat a stretch: many fields, deep paths, long lines.
                let end = rng.random_range(at..=input.len().min(at + 32));
                let stretch = input[at..end].to_vec();
                for _ in 0..rng.random_range(1..=64) {
                    input.splice(at..at, stretch.iter().copied());
                }
            }
            6 => {
                let other = seeds[rng.random_range(0..seeds.len())];
                let from = rng.random_range(0..=other.len());
                input.splice(at..at, other[from..].iter().copied().take(256));
            }
            _ => input.truncate(at),
        }
    }
    input.truncate(MAX_LEN);
}

/// One input as Rust byte-string text, to paste into a regression test.
fn shown(input: &[u8]) -> String {
    input.iter().flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect()
}

/// Feed `target` mutated seeds and random bytes for the budget; `target` panics on a bug.
pub fn fuzz(name: &str, seeds: &[&[u8]], mut target: impl FnMut(&[u8])) {
    let seed = std::env::var("PEAKBENCH_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        // No OS entropy source without rand's default features: the clock's nanoseconds differ per run.
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    let mut rng = Pcg64::seed_from_u64(seed);
    let (started, budget) = (Instant::now(), budget());
    let mut runs = 0u64;
    let mut input = Vec::new();
    while runs < seeds.len() as u64 || started.elapsed() < budget {
        input.clear();
        match seeds.get(runs as usize) {
            Some(s) => input.extend_from_slice(s),
            None if rng.random_ratio(1, 16) => input.extend((0..rng.random_range(0..512)).map(|_| rng.random::<u8>())),
            None => {
                input.extend_from_slice(seeds[rng.random_range(0..seeds.len())]);
                mutate(&mut rng, seeds, &mut input);
            }
        }
        let one = Instant::now();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&input))) {
            eprintln!("fuzz {name}: panic on input b\"{}\" (PEAKBENCH_FUZZ_SEED={seed})", shown(&input));
            resume_unwind(panic);
        }
        assert!(one.elapsed() < SLOW, "fuzz {name}: {:?} on input b\"{}\" (PEAKBENCH_FUZZ_SEED={seed})", one.elapsed(), shown(&input));
        runs += 1;
    }
    println!("fuzz {name}: {runs} inputs in {:.1} s, seed {seed}: no panic, none slower than {SLOW:?}", started.elapsed().as_secs_f64());
}
