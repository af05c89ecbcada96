"""Harness pieces on their own: key positions, the stop rule, the process barrier, merging trials."""

import os
import time

import pytest
from peakbench.harness import stoprule
from peakbench.harness.monitor import disk_stats, memory, process_cpu
from peakbench.harness.process import aggregate, run_together
from peakbench.tomlpos import Positions


def test_positions_of_keys_tables_arrays_and_inline_tables():
    text = (
        'name = "x"\n[[test]]\nname = "a"\nloop = {n = [1, 2]}\n[test.hooks]\nsetup = [\n  ["a"],\n'
        '  ["b"],\n]\n[[test]]\nname = "b"\nstop.until = "x"\ns = """\n[[test]]\n"""\nz = 1\n'
    )
    positions = Positions(text)
    assert positions.line_of(("test", 0, "loop", "n", 1)) == 4
    assert positions.line_of(("test", 0, "hooks", "setup", 1, 0)) == 8
    assert positions.line_of(("test", 1, "stop", "until")) == 12
    assert positions.line_of(("test", 1, "z")) == 16  # the multi-line string hid a fake header
    assert positions.line_of(("test", 1, "nope")) == 10  # the nearest written ancestor


def test_stop_rule_min_check_every_until_max():
    stop = {"min_runs": 3, "max_runs": 6, "check_every": 2, "until": "hw_pct < 5"}
    same = [{"v": 10.0}] * 6
    assert stoprule.decide(stop, "v", same[:2])[0] is None  # below min_runs
    assert "held after 3 runs" in stoprule.decide(stop, "v", same[:3])[0]
    noisy = [{"v": v} for v in (10, 20, 10, 20, 10, 20)]
    assert stoprule.decide(stop, "v", noisy[:4])[0] is None  # not a check point
    assert stoprule.decide(stop, "v", noisy[:6])[0] == "max_runs (6) reached"
    fixed = {"min_runs": 2, "max_runs": 2, "check_every": 1, "until": None}
    assert stoprule.decide(fixed, "v", same[:2])[0] == "max_runs (2) reached"
    other = {"min_runs": 2, "max_runs": 9, "check_every": 1, "until": "x.count >= 3 and elapsed > 1"}
    runs = [{"v": 1.0, "x": 2.0}] * 3
    assert stoprule.decide(other, "v", runs, elapsed=2)[0] is not None
    assert stoprule.decide(other, "v", runs, elapsed=0.5)[0] is None
    missing = {"min_runs": 1, "max_runs": 3, "check_every": 1, "until": "nope.hw_pct < 1"}
    decision, warning = stoprule.decide(missing, "v", runs[:1])
    assert decision is None and "nope" in warning


@pytest.mark.integration
def test_processes_start_behind_a_barrier_with_their_index(tmp_path):
    stamp = 'import os, time; time.sleep(0.01 * int(os.environ["PEAKBENCH_THREAD"])); print(time.time())'
    import sys

    commands = [[sys.executable, "-c", stamp] for _ in range(3)]
    envs = [dict(os.environ, PEAKBENCH_THREAD=str(i)) for i in (1, 2, 3)]
    before = time.time()
    results = run_together(commands, shell=False, envs=envs, timeout_s=60, output_dir=tmp_path, label="b")
    assert [r.index for r in results] == [1, 2, 3] and all(r.ok for r in results)
    assert all(float(r.stdout) >= before for r in results)
    totals = aggregate(results)
    assert totals["elapsed"] == max(r.elapsed for r in results)
    assert totals["cpu"] == pytest.approx(sum(r.user + r.system for r in results))
    assert (tmp_path / "b.2.out").read_text() == results[1].stdout


@pytest.mark.integration
def test_timeouts_kill_the_whole_process_group_and_bad_programs_are_reported(tmp_path):
    started = time.monotonic()
    [slow] = run_together(
        ["sleep 30 & sleep 30; wait"],
        shell=True,
        envs=[dict(os.environ)],
        timeout_s=0.3,
        output_dir=tmp_path,
        label="t",
    )
    assert slow.timed_out and not slow.ok and time.monotonic() - started < 10
    assert "timed out" in slow.describe_failure()
    [missing] = run_together(
        [["/no/such/program"]], shell=False, envs=[dict(os.environ)], timeout_s=5, output_dir=tmp_path, label="m"
    )
    assert not missing.ok and "cannot start /no/such/program" in missing.describe_failure()
    [failed] = run_together(
        [["sh", "-c", "echo boom >&2; exit 4"]],
        shell=False,
        envs=[dict(os.environ)],
        timeout_s=5,
        output_dir=tmp_path,
        label="f",
    )
    assert failed.exit_status == 4 and failed.describe_failure() == "exit status 4: boom"


def test_proc_parsers():
    assert memory("MemTotal: 100 kB\nMemAvailable: 50 kB\n") == {"MemTotal": 102400, "MemAvailable": 51200}
    line = "   7       0 loop0 10 0 80 5 20 0 160 7 0 9 12 0 0 0 0\n"
    assert disk_stats("loop0", line) == {
        "reads": 10,
        "read_bytes": 40960,
        "writes": 20,
        "write_bytes": 81920,
        "io_ms": 9,
    }
    assert disk_stats("sda", line) is None
    mine = process_cpu(["python3", "pytest", "python"])
    assert sum(mine.values()) > 0  # this very process is one of them
