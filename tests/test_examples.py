"""Every file in examples/ runs as its comment says, with shorter trials, and stores its job."""

from __future__ import annotations

import re
import shutil
import sqlite3

import pytest
from conftest import REPO

EXAMPLES = REPO / "examples"
SHORTER = [  # (pattern, replacement): the examples' trial lengths and sfs load lists cut to make the test quick
    (r'(?m)^warmup = ".*"$', 'warmup = "0s"'),
    (r'(?m)^runtime = ".*"$', 'runtime = "0.3s"'),
    (r"(?m)^WARMUP_TIME=.*$", "WARMUP_TIME=0"),
    (r"(?m)^RUNTIME=.*$", "RUNTIME=0.5"),
    (r"(?m)^LOAD=.*$", 'LOAD="64 128"'),
]
COMMANDS = {  # how each kind of example is run, and the store table its job lands in
    "workloads": (
        ["run", "{file}", "--target", "null://", "--rate", "100", "--warmup", "0", "--runtime", "0.5"],
        "trials",
    ),
    "plans": (["plan", "run", "{file}"], "plans"),
    "surfaces": (["surface", "{file}"], "surfaces"),
    # Several mount points run as local load clients, whose clocks agree; a loaded machine's slow round
    # trips only blur the measurement of that, so the start-skew bound is wider than the default.
    "sfs": (["sfs", "{file}", "--clock-tolerance", "200"], "sfs_runs"),
}


def examples() -> list[str]:
    found = sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/*") if p.is_file())
    assert {name.split("/")[0] for name in found} == set(COMMANDS), "an example directory no test runs"
    return found


@pytest.mark.parametrize("example", examples())
def test_the_example_runs_and_stores_its_job(example, engine_path, cli, tmp_path):
    text = (EXAMPLES / example).read_text()
    for pattern, replacement in SHORTER:
        text = re.sub(pattern, replacement, text)
    copy = tmp_path / example
    copy.parent.mkdir(parents=True)
    copy.write_text(text)
    for folder in (EXAMPLES / example).parent.iterdir():  # what an example names beside it (sfs mount-point files)
        if folder.is_dir():
            shutil.copytree(folder, copy.parent / folder.name)
    # the sfs examples' mount points, relative to where they run
    for directory in ("peakbench-sfs-target", "sfs-guide/test1", "sfs-guide/test2"):
        (tmp_path / directory).mkdir(parents=True)
    args, table = COMMANDS[example.split("/")[0]]
    done = cli(*[a.format(file=copy) for a in args], "--db", str(tmp_path / "r.db"), cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr  # 3: a search or surface with no peak in range
    with sqlite3.connect(tmp_path / "r.db") as connection:
        statuses = [status for (status,) in connection.execute(f"SELECT status FROM {table}")]
    assert statuses and all(status == "done" for status in statuses), statuses
