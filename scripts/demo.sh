#!/usr/bin/env bash
# The main job: install peakbench, then benchmark a local directory with a canned workload.
# Override with PEAKBENCH_TARGET (a directory you own) and PEAKBENCH_WORKLOAD.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
target="${PEAKBENCH_TARGET:-$PWD/peakbench-data/target}"
mkdir -p "$target"
peakbench run "${PEAKBENCH_WORKLOAD:-web-server}" --target "$target" --rate 500 --warmup 2 --runtime 10 \
  --db "$PWD/peakbench-data/peakbench.db"
