"""docs/clusters.md's Slurm recipe, run as written on a one-node Slurm cluster (tests/slurm.py).

The recipe's script is taken from the guide, started with 2 jobs, and its printed scheduler
address given to `peakbench run --cluster`: a 2-client trial whose load clients are the workers
of the two Slurm jobs, merged into one result. Ending the script (end of its input) must leave
no job behind. Installing Slurm takes about a minute on a fresh machine, so the test is slow.
"""

from __future__ import annotations

import json
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from slurm import Slurm, SlurmUnavailable  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WAIT_S = 120.0


def recipe() -> str:
    """The guide's Slurm script: the first python block after the Slurm heading."""
    guide = (REPO / "docs" / "clusters.md").read_text()
    section = guide[guide.index("## On a Slurm cluster") :]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]


def first_line(process: subprocess.Popen, timeout_s: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise TimeoutError(f"the recipe printed nothing in {timeout_s:.0f} s")
    return process.stdout.readline().strip()


@pytest.fixture(scope="module")
def slurm():
    cluster = Slurm()
    try:
        cluster.start()
    except SlurmUnavailable as error:
        pytest.fail(f"Slurm could not be started: {error}")
    yield cluster
    cluster.stop()


def test_the_slurm_recipe_runs_a_merged_two_client_trial(slurm, engine_path, tmp_path):
    env = {**slurm.env, "PYTHONPATH": str(REPO / "python"), "PEAKBENCH_ENGINE": str(engine_path)}
    script = tmp_path / "slurm-clients.py"
    script.write_text(recipe())
    log = (tmp_path / "recipe.log").open("w")
    # The script runs where the user submits from; Slurm writes the jobs' output files there.
    submitter = subprocess.Popen(
        [sys.executable, str(script), "2"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    try:
        scheduler = first_line(submitter, WAIT_S)
        assert scheduler.startswith("tcp://"), scheduler
        deadline = time.monotonic() + WAIT_S
        while len(slurm.running_jobs()) < 2:
            assert time.monotonic() < deadline, f"jobs not running: {slurm.jobs()}; {slurm.logs()}"
            time.sleep(0.5)
        jobs = set(slurm.running_jobs())
        # Wait for both jobs' workers to join, then ask each worker which Slurm job it runs in.
        asked = subprocess.run(
            [
                sys.executable,
                "-c",
                "import os; from distributed import Client;"
                f" c = Client({scheduler!r}, timeout=60); c.wait_for_workers(2, timeout={WAIT_S});"
                " print(' '.join(sorted(c.run(lambda: os.environ['SLURM_JOB_ID']).values())))",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT_S + 60,
        )
        assert asked.returncode == 0, asked.stderr[-2000:]
        assert set(asked.stdout.split()) == jobs

        out = tmp_path / "trial.json"
        target = tmp_path / "shared"
        target.mkdir()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "peakbench.cli",
                "run",
                "mail",
                "--target",
                str(target),
                "--rate",
                "400",
                "--warmup",
                "0.5",
                "--runtime",
                "2",
                "--cluster",
                scheduler,
                "--clients",
                "2",
                "--clock-tolerance",
                "50",
                "--db",
                str(tmp_path / "p.db"),
                "--json",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"cluster: 2 load clients (workers of {scheduler})" in done.stderr
        result = json.loads(out.read_text())
        parts = result["clients"]
        assert [c["requested_rate"] for c in parts] == [200.0, 200.0]
        assert result["cluster"]["verdict"] == "complete" and result["lagging"] == []
        assert result["achieved_rate"] == pytest.approx(sum(c["achieved_rate"] for c in parts))
        assert result["achieved_rate"] == pytest.approx(400.0, rel=0.02)
        assert sum(sum(op["errors"].values()) for op in result["ops"].values()) == 0
    finally:
        # End of input ends the recipe's script, and with it the cluster and its jobs.
        submitter.stdin.close()
        try:
            submitter.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            submitter.kill()
            submitter.wait(timeout=10)
    log.close()
    assert submitter.returncode == 0, (tmp_path / "recipe.log").read_text()[-2000:]
    deadline = time.monotonic() + WAIT_S
    while slurm.jobs():
        assert time.monotonic() < deadline, f"jobs left after the recipe ended: {slurm.jobs()}"
        time.sleep(0.5)
