"""The guide's 4 clients x 8 procs example (examples/sfs/guide_4x8_rc) against nfs-ganesha: the rc file
as shipped except its load list (one point; test_examples runs the list) and trial lengths, cut to make
the test quick, beside a mount-point file naming two directories of ganesha's export as SPEC writes
them, `server:/path`."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from conftest import REPO

# Slow: a ganesha and an sfs run of two clients (40 s on a busy machine); CI leaves it to `-m slow`.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHORTER = [
    (r"(?m)^LOAD=.*$", "LOAD=128"),
    (r"(?m)^WARMUP_TIME=.*$", "WARMUP_TIME=0"),
    (r"(?m)^RUNTIME=.*$", "RUNTIME=1"),
]


def test_the_guides_example_runs_against_nfs_ganesha(ganesha_server, engine_path, cli, tmp_path):
    text = (REPO / "examples" / "sfs" / "guide_4x8_rc").read_text()
    for pattern, replacement in SHORTER:
        text = re.sub(pattern, replacement, text)
    rc = tmp_path / "guide_4x8_rc"
    rc.write_text(text)
    names = ("guide-test1", "guide-test2")
    exports = [ganesha_server.url(name).removeprefix("nfs://").replace("/", ":/", 1) for name in names]
    (tmp_path / "mounts").mkdir()
    (tmp_path / "mounts" / "4x8").write_text(
        "".join(f"client{n} {' '.join(exports * 4)}\n" for n in range(1, 5))  # 4 procs of each client per export
    )
    db = tmp_path / "p.db"
    # The two exports run as two local load clients, whose clocks agree; a loaded machine's slow round
    # trips only blur the measurement of that, so the start-skew bound is wider than the default.
    done = cli("sfs", str(rc), "--db", str(db), "--clock-tolerance", "200")
    assert done.returncode == 0, done.stderr
    assert "4 client(s) x 8 proc(s) = 32 processes" in done.stderr
    with sqlite3.connect(db) as connection:
        results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
    assert [r["requested_rate"] for r in results] == [128]
    for result in results:  # each export's 16 procs offered half the load, and every request succeeded
        rate = result["requested_rate"]
        assert [c["requested_rate"] for c in result["clients"]] == pytest.approx([rate / 2, rate / 2])
        assert result["outcomes"]["errors"] == 0 and result["achieved_rate"] > 0
    for name in names:  # each export holds the file set its procs built over NFS
        assert (ganesha_server.export_dir / name / ".peakbench-manifest.json").is_file()
    lines = (tmp_path / "p-sfs-1" / "sfssum.1").read_text().splitlines()
    assert [line.split()[5:8] + line.split()[9:10] for line in lines] == [["NFS3", "T", "4", "4"]]
