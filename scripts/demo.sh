#!/usr/bin/env bash
# The main job: install peakbench, then a quick peak-rate search on a default local
# target (as root: a throttled loop-mounted ext4 image under ./peakbench-data).
# Results go to ./peakbench-data/peakbench.db and ./peakbench-data/search.json; it ends
# by writing ./peakbench-data/report.html (self-contained) and printing its path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
python3 -m peakbench.demo "$@"
