#!/usr/bin/env bash
# The test suite: the engine's own tests (cargo test) and the rest (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The report tests open the HTML in a real headless browser.
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
export PATH="$HOME/.cargo/bin:$PATH"
# Style first: both ecosystems' formatters and linters, as the project holds them.
(cd engine && cargo fmt --check && cargo clippy --release --quiet --all-targets -- -D warnings)
python3 -m ruff check python tests benchmarks
python3 -m ruff format --check python tests benchmarks
(cd engine && cargo test --release --quiet)
# Every parser under random input for a moment (bash scripts/fuzz.sh 60 is the real run).
bash scripts/fuzz.sh 1
# pytest exits 5 when it collects nothing: that is a failure here, never a pass.
# The soak tests (marker `slow`) keep CI under 30 minutes by running only when asked:
# `bash scripts/test.sh -m slow` runs them, `bash scripts/test.sh -m ''` runs everything.
# The 25 slowest are listed, so the CI log shows where the 30-minute budget goes.
python3 -m pytest -q -p no:cacheprovider -m "not slow" --durations=25 "$@"
