#!/usr/bin/env bash
# Fuzz every parser for SECONDS each (default 60): the engine's (HTTP reply, NFS reply,
# SMB2 reply, access-log line; stable Rust, engine/src/fuzz.rs) and Python's (workload, plan, rc file,
# mixfile, histogram; atheris, tests/fuzz/parsers.py). Exit 0 only if none panicked,
# raised anything but a refusal, hung or ran out of memory. CI runs it for a few seconds each.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
work=$(mktemp -d -t peakbench-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
export PATH="$HOME/.cargo/bin:$PATH"
limit=$(awk -v s="$seconds" 'BEGIN { printf "%d", s * 1.5 + 120 }')  # a hang is a failure, not a stuck CI

# One test binary for the four engine targets, then each target on its own clock.
(cd engine && cargo test --release --quiet --no-run)
for target in fuzz_http_reply fuzz_nfs_reply fuzz_smb2_reply fuzz_access_log_line; do
  (cd engine && PEAKBENCH_FUZZ_SECONDS=$seconds timeout "$limit" cargo test --release --quiet -- --ignored --nocapture "$target" | grep "^fuzz ")
done

for target in workload plan rc mixfile histogram; do
  mkdir -p "$work/$target"
  if ! PYTHONPATH="$PWD/python" TMPDIR="$work/$target" timeout "$limit" python3 tests/fuzz/parsers.py "$target" \
      -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -artifact_prefix="$work/$target/" >"$work/$target.log" 2>&1; then
    tail -n 40 "$work/$target.log"
    echo "fuzz $target: FAILED (the input is above)" >&2
    exit 1
  fi
  echo "fuzz $target: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work/$target.log"): no exception but InputError, no hang"
done
