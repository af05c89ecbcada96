#!/usr/bin/env bash
# Builds what users install without a Rust toolchain, into dist/: a manylinux2014 wheel
# (glibc 2.17 and newer; zig links it against that baseline) with a stripped engine, and the sdist.
# Then installs the wheel into a fresh virtual environment with no cargo on PATH and runs the
# README's main job from it (python -m peakbench.demo: a quick peak-rate search of the default
# local target, ending in a report) in a scratch directory, and checks that the report names a
# peak inside its interval.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/build"
"$tools/build/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" ziglang
# maturin finds zig through `python3 -m ziglang`: the build environment's python comes first.
export PATH="$tools/build/bin:$HOME/.cargo/bin:$PATH"
"$tools/build/bin/maturin" build --release --strip --zig --compatibility manylinux2014 --out dist
"$tools/build/bin/maturin" sdist --out dist
wheel=$(ls -t dist/peakbench-*manylinux*.whl | head -n 1)
python3 -m venv "$tools/user"
"$tools/user/bin/pip" install -q --disable-pip-version-check "$wheel"
# The user's environment: no Rust anywhere on PATH.
user_path="$tools/user/bin:/usr/sbin:/usr/bin:/sbin:/bin"
env PATH="$user_path" peakbench --version
mkdir "$tools/demo"
started=$(date +%s)
(cd "$tools/demo" && env PATH="$user_path" python -m peakbench.demo)
took=$(($(date +%s) - started))
env PATH="$user_path" python - "$tools/demo/peakbench-data" <<'CHECK'
import json
import sys
from pathlib import Path

data = Path(sys.argv[1])
result = json.loads((data / "search.json").read_text())
peak, low, high = result["peak_rate"], result["ci_low"], result["ci_high"]
if result["verdict"] != "peak" or low is None or not low <= peak <= high:
    sys.exit(f"wheel.sh: the main job found no peak inside an interval: {result['message']}")
report = data / "report.html"
named = (f"peak rate {peak:.1f} ops/s", f"{low:.1f}", f"{high:.1f}")
if not all(text in report.read_text() for text in named):
    sys.exit(f"wheel.sh: {report} does not name the peak {peak:.1f} ops/s and its interval {low:.1f}-{high:.1f}")
print(f"wheel.sh: the report names the peak {peak:.1f} ops/s inside {low:.1f}-{high:.1f} ({result['trials']} trials)")
CHECK
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1)); installed without Rust; the main job ran in ${took} s"
