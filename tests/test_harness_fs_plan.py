"""The real plan of the issue: ext4, xfs and btrfs on loop-mounted images, remounted before every
run for a cold cache, a Postmark-like mail workload with 1, 2 and 4 threads, run until the
half-width is under 5% of the mean or 10 runs; then the report and the comparison of the file
systems, all through the CLI. Needs root (mkfs, losetup, mount)."""

import json
import os
import shutil
import sqlite3
import sys
import textwrap
from pathlib import Path

import peakbench.harness.postmark as postmark_module
import pytest

MISSING = [tool for tool in ("mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "losetup") if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or bool(MISSING), reason=f"needs root and {', '.join(MISSING) or 'mkfs tools'}"
)

PLAN = """
name = "fs-compare"
description = "Postmark-like mail workload on three file systems, cold cache"
[vars]
files = 40
transactions = 150
[[test]]
name = "postmark-{fs}-{threads}"
loop = {fs = ["ext4", "xfs", "btrfs"], threads = {from = 1, to = 4, factor = 2}}
threads = "{threads}"
fs = {type = "{fs}", size = "320MB"}
cache = "remount"
command = ["PYTHON", "-I", "-S", "POSTMARK", "--dir", "{mount}/t{thread}", "--files", "{files}",
           "--transactions", "{transactions}"]
parse = "json"
monitor = {interval = "0.2s"}
[test.stop]
min_runs = 3
until = "hw_pct < 5"
max_runs = 10
"""


def test_ext4_xfs_btrfs_with_1_2_4_threads(cli, tmp_path):
    plan = tmp_path / "fs.toml"
    plan.write_text(
        textwrap.dedent(PLAN).replace("PYTHON", sys.executable).replace("POSTMARK", postmark_module.__file__)
    )
    db = tmp_path / "fs.db"
    report_json = tmp_path / "report.json"
    done = cli("plan", "run", str(plan), "--db", str(db), "--json", str(report_json))
    assert done.returncode == 0, done.stderr[-3000:]
    names = [f"postmark-{fs}-{n}" for fs in ("ext4", "xfs", "btrfs") for n in (1, 2, 4)]

    # The report: a getstats row per test for the stop metric, with O/H against ext4 with 1 thread.
    assert "getstats" in done.stdout and "HW%" in done.stdout and "O/H" in done.stdout
    data = json.loads(report_json.read_text())
    elapsed = [r for r in data["getstats"] if r["metric"] == "elapsed"]
    assert [r["test"] for r in elapsed] == names
    assert elapsed[0]["O/H"] is None and all(r["O/H"] is not None for r in elapsed[1:])
    for test in data["tests"]:
        assert test["status"] == "done"
        assert 3 <= test["counted"] <= 10
        assert test["counted"] == 10 or "hw_pct < 5" in test["stop_reason"]

    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    for name, fstype in zip(names, [fs for fs in ("ext4", "xfs", "btrfs") for _ in range(3)]):
        runs = connection.execute(
            "SELECT r.* FROM plan_runs r JOIN plan_tests t ON t.id = r.test_id WHERE t.name = ? ORDER BY attempt",
            (name,),
        ).fetchall()
        for run in runs:
            cache = json.loads(run["cache"])
            assert cache == [{"policy": "remount", "mount_point": cache[0]["mount_point"], "fs_type": fstype}]
            sysinfo = json.loads(run["sysinfo"])
            assert sysinfo["target_fs"]["fs_type"] == fstype
            assert sysinfo["target_fs"]["device"].startswith("/dev/loop")
            assert any(d["name"].startswith("loop") for d in sysinfo["disks"])
            monitor = json.loads(run["monitor"])["summary"]
            assert monitor["device"].startswith("loop")  # the target's own device is watched
            assert "disk_write_mb" in monitor and monitor["samples"] >= 2
            threads = json.loads(run["threads"])
            assert len(threads) == int(name.rsplit("-", 1)[1])
            assert all(t["metrics"]["transactions"] == 150 for t in threads)
    # Nothing is left mounted or attached.
    workdir = Path(str(db) + ".work")
    assert str(workdir) not in Path("/proc/self/mountinfo").read_text()
    assert not list(workdir.rglob("*.img"))

    # The comparison between the file systems, from the store.
    compared = tmp_path / "cmp.json"
    done = cli("compare", "postmark-ext4-1", "postmark-btrfs-1", "--db", str(db), "--json", str(compared))
    assert done.returncode == 0, done.stderr
    assert "verdict:" in done.stdout and "u1 <= u2" in done.stdout
    result = json.loads(compared.read_text())
    assert result["rests_on"] in ("welch-t", "mann-whitney")
    assert [h["null"] for h in result["hypotheses"]] == ["u1 <= u2", "u1 >= u2", "u1 = u2"]
    assert result["welch"]["low"] <= result["welch"]["difference"] <= result["welch"]["high"]
    done = cli("compare", "postmark-xfs-4", "postmark-btrfs-4", "--db", str(db), "--metric", "cpu")
    assert done.returncode == 0 and "cpu:" in done.stdout
