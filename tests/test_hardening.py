"""Hostile and careless input (issue 16): refused at once with one line naming file, line and field,
exit 2, nothing written; no hang, no MemoryError, no traceback."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from peakbench.store import Store

# Every case here is refused while reading its input; a case that runs out of time or memory
# instead shows up as subprocess.TimeoutExpired or a traceback.
QUICK_S = 60


def assert_refused(done, fragment, nothing_in=None):
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
    assert fragment in done.stderr, done.stderr
    if nothing_in is not None:
        assert sorted(p.name for p in nothing_in.iterdir() if p.suffix == ".db") == []


def write(path, text):
    path.write_text(text)
    return path


def line_of(path, fragment):
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


# ---- plans: bounded expressions and loops counted before they are made


@pytest.mark.parametrize(
    "when, fragment",
    [
        ("9**9**9 > n", "is too large (more than 1024 bits)"),
        ("len(str(n) * 10**10) > 0", "a repetition longer than 100,000"),
        ("len('%099999999d' % n) > 0", "% formatting of a string is not allowed"),
        ("int('x') > n", "int(): invalid literal"),
        ("10.0 ** 400 > n", "is too large"),
    ],
)
def test_a_plan_expression_is_refused_before_it_exhausts_time_or_memory(cli, tmp_path, when, fragment):
    plan = write(
        tmp_path / "p.toml", f'[[test]]\nname = "t-{{n}}"\nloop = {{n = [1, 2]}}\nwhen = "{when}"\ncommand = ["true"]\n'
    )
    done = cli("plan", "run", str(plan), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(done, f"{plan}:4: field test[0].when: ", tmp_path)
    assert fragment in done.stderr


@pytest.mark.parametrize(
    "loop, fragment",
    [
        ("{n = {from = 1, to = 2, factor = 1.0000000001}}", "the range has 6,931,47"),
        (
            "{a = {from = 1, to = 100}, b = {from = 1, to = 100}, c = [1, 2]}",
            "the loops make 20,000 combinations, more than 10,000",
        ),
    ],
)
def test_plan_loops_are_counted_before_their_values_are_made(cli, tmp_path, loop, fragment):
    plan = write(tmp_path / "p.toml", f'[[test]]\nname = "t"\nloop = {loop}\ncommand = ["true"]\n')
    done = cli("plan", "check", str(plan), timeout=QUICK_S)
    assert_refused(done, fragment, tmp_path)
    assert done.stderr.startswith(f"peakbench: {plan}:3: field test[0].loop")


def test_a_plan_trial_runtime_past_the_platform_timers_is_refused(cli, tmp_path):
    plan = write(
        tmp_path / "p.toml",
        f'[[test]]\nname = "t"\nworkload = "mail"\ntarget = "{tmp_path}/t"\nrate = 10\nruntime = 1e12\n',
    )
    done = cli("plan", "check", str(plan), timeout=QUICK_S)
    assert_refused(done, f"{plan}:6: field test[0].runtime: duration 1000000000000.0 is longer than 30 days")


# ---- the command line


@pytest.mark.parametrize(
    "option, value, fragment",
    [
        ("--runtime", "1e12", "argument --runtime: duration '1e12' is longer than 30 days"),
        ("--warmup", "400000h", "argument --warmup: duration '400000h' is longer than 30 days"),
        ("--scale", "1e308", "the file set would have more files than a float can count"),
    ],
)
def test_run_refuses_numbers_past_what_it_can_honour(cli, tmp_path, option, value, fragment):
    target = tmp_path / "target"
    target.mkdir()
    done = cli(
        "run",
        "mail",
        "--target",
        str(target),
        "--db",
        str(tmp_path / "p.db"),
        "--rate",
        "10",
        "--runtime",
        "1",
        option,
        value,
        timeout=QUICK_S,
    )
    assert_refused(done, fragment, tmp_path)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize(
    "fileset, scaling, field, fragment",
    [
        (
            "files_per_dir = 1e15",
            "files_per_op = 1",
            "fileset.files_per_dir",
            "1e+15 is more than 1,000,000 entries in one directory",
        ),
        (
            'files_per_dir = {kind = "uniform", low = 1, high = 1e9}',
            "files_per_op = 1",
            "fileset.files_per_dir.high",
            "1e+09 is more than 1,000,000 entries",
        ),
        (
            "files_per_dir = 4",
            "files_per_op = 1e308",
            "scaling.files_per_op",
            "must be at most 1,000,000 files per op/s",
        ),
        (
            "files_per_dir = 4",
            'bytes_per_op = "1e300B"',
            "scaling.bytes_per_op",
            "must be above 0 and at most 1 TiB per op/s",
        ),
    ],
)
def test_workload_numbers_are_range_checked_where_they_are_read(cli, tmp_path, fileset, scaling, field, fragment):
    workload = write(
        tmp_path / "w.toml",
        f"[fileset]\n{fileset}\ndirs_per_dir = 0\nmax_depth = 0\n"
        f'file_sizes = "4KiB"\n[scaling]\n{scaling}\n[mix]\nread = 1\n',
    )
    target = tmp_path / "target"
    target.mkdir()
    done = cli(
        "run",
        str(workload),
        "--target",
        str(target),
        "--db",
        str(tmp_path / "p.db"),
        "--rate",
        "10",
        "--runtime",
        "1",
        timeout=QUICK_S,
    )
    key = field.split(".")[1]
    assert_refused(done, f"{workload}:{line_of(workload, key)}: field {field}: {fragment}", tmp_path)
    assert list(target.iterdir()) == []


# ---- rc files


@pytest.mark.parametrize(
    "lines, field, fragment",
    [
        ("LOAD=100\nINCR_LOAD=100\nNUM_RUNS=1000000000000", "NUM_RUNS", "1000000000000 is more than 1,000"),
        ("LOAD=1e308", "LOAD", "'1e308' is above 50,000,000 ops/s"),
        ("LOAD=100\nINCR_LOAD=1e9\nNUM_RUNS=100", "INCR_LOAD", "'1e9' is above 50,000,000 ops/s"),
        ("LOAD=100\nINCR_LOAD=1e6\nNUM_RUNS=100", "INCR_LOAD", "the last load point, 9.90001e+07 ops/s, is above"),
        ("LOAD=100\nPROCS=99999999999", "PROCS", "99999999999 is more than 1,024"),
    ],
)
def test_rc_file_numbers_are_range_checked_before_points_are_made(cli, tmp_path, lines, field, fragment):
    rc = write(tmp_path / "sfs_rc", f"{lines}\nMNT_POINTS={tmp_path / 'target'}\n")
    done = cli("sfs", str(rc), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(done, f"{rc}:{line_of(rc, field + '=')}: field {field}: {fragment}", tmp_path)


# ---- surface plans


def test_a_surface_design_is_counted_before_it_is_made(cli, tmp_path):
    factors = "".join(f'[[factors]]\nname = "f{i}"\nlevels = "1,2,3,4,5,6,7,8,9,10"\n' for i in range(10))
    plan = write(
        tmp_path / "s.toml",
        f'workload = "mail"\ntarget = "sim://mail?capacity=500"\n[design]\nkind = "full-factorial"\n{factors}',
    )
    done = cli("surface", str(plan), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(
        done,
        f"{plan}:4: field design.kind: a full factorial of these levels is 10,000,000,000 searches, more than 1,000",
        tmp_path,
    )
    write(plan, plan.read_text().replace('"full-factorial"', '"d-optimal"\nsamples = 70'))
    done = cli("surface", str(plan), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(done, "the levels make 10,000,000,000 combinations for the D-optimal choice", tmp_path)


# ---- reports


def test_a_wide_trial_range_is_one_query_not_one_per_id(cli, tmp_path):
    db = tmp_path / "p.db"
    Store(db).close()
    started = time.monotonic()
    done = cli("report", "trial:1-99999999999", "--db", str(db), timeout=QUICK_S)
    assert done.returncode == 2 and "no trial 1-99999999999 in the store" in done.stderr, done.stderr
    assert time.monotonic() - started < QUICK_S
    done = cli("report", "trial:1-99999999999999999999999", "--db", str(db), timeout=QUICK_S)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    done = cli("report", "trial:5-2", "--db", str(db), timeout=QUICK_S)
    assert_refused(done, "'trial:5-2': the range ends before it starts")


# ---- no orphaned engines


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_engine_dies_with_its_controller(engine_path, tmp_path):
    """kill -9 of `peakbench run` mid-trial: the engine stops within two seconds, not at the end of its minute."""
    target = tmp_path / "target"
    target.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "peakbench.cli",
            "run",
            "mail",
            "--target",
            str(target),
            "--rate",
            "50",
            "--warmup",
            "0",
            "--runtime",
            "60",
            "--db",
            str(tmp_path / "p.db"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        engine = None
        deadline = time.monotonic() + 60
        while engine is None and time.monotonic() < deadline:
            running = [
                pid
                for pid in _children(controller.pid)
                if Path(f"/proc/{pid}/cmdline").read_text().split("\0")[1:2] == ["run"]
            ]
            engine = running[0] if running else None
            time.sleep(0.1)
        assert engine is not None, "the engine's trial never started"
        time.sleep(1.0)  # well inside the trial
        controller.send_signal(signal.SIGKILL)
        controller.wait()
        killed = time.monotonic()
        while _alive(engine) and time.monotonic() - killed < 10:
            time.sleep(0.05)
        assert not _alive(engine), "the engine outlived its controller by 10 s"
        assert time.monotonic() - killed < 2.0
    finally:
        controller.kill()
        controller.wait()


# ---- symlinks planted in a file set


PLANTED = """\
[fileset]
files_per_dir = 8
dirs_per_dir = 2
max_depth = 1
file_sizes = "4KiB"
[scaling]
files_per_op = 0.05
min_files = 24
[mix]
write = 30
setattr = 15
remove = 10
rename = 10
create = 10
mkdir = 10
link = 10
commit = 5
[write]
size = "4KiB"
pattern = "random"
"""


def _snapshot(root: Path) -> dict:
    """Everything a write outside the target could change: names, kinds, modes, contents."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(root))] = (info.st_mode, content)
    return found


def test_symlinks_planted_in_a_file_set_never_lead_writes_outside_the_target(engine_path, cli, tmp_path):
    from peakbench.engine import Engine
    from peakbench.targets import parse_target
    from peakbench.workload import load_workload, trial_spec

    workload_path = write(tmp_path / "w.toml", PLANTED)
    target = tmp_path / "target"
    target.mkdir()
    done = cli("prepare", str(workload_path), "--target", str(target), "--rate", "10")
    assert done.returncode == 0, done.stderr
    (layout,) = [p for p in target.iterdir() if p.is_dir()]
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = 0
    for file in sorted(p for p in layout.rglob("*") if p.is_file()):
        victim = outside / f"victim{planted}"
        victim.write_bytes(b"precious " * 100)
        victim.chmod(0o600)
        file.unlink()
        file.symlink_to(victim)
        planted += 1
    # A directory of the set replaced by a symlink to an outside directory holding the same names.
    subdir = next(p for p in sorted(layout.iterdir()) if p.is_dir() and not p.is_symlink())
    twin = outside / "twin"
    twin.mkdir()
    for entry in subdir.iterdir():
        (twin / entry.name).write_bytes(b"twin " * 100)
        (twin / entry.name).chmod(0o600)
    for entry in subdir.iterdir():
        entry.unlink()
    subdir.rmdir()
    subdir.symlink_to(twin, target_is_directory=True)
    before = _snapshot(outside)
    assert planted >= 16

    workload = load_workload(workload_path)
    spec = trial_spec(workload, parse_target(str(target)), rate=400, warmup_s=0, runtime_s=2)
    result = Engine().run(spec)

    assert _snapshot(outside) == before
    refused = {op: figures["errors"].get("ELOOP", 0) for op, figures in result["ops"].items()}
    for op in ("write", "setattr", "remove", "rename", "link", "commit"):
        assert refused[op] > 0, (op, result["ops"][op])


# ---- a file set damaged after it was built


READS = PLANTED.split("[mix]")[0] + '[mix]\nread = 1\ngetattr = 1\n[read]\nsize = "4KiB"\npattern = "whole_file"\n'


def test_a_damaged_file_set_is_repaired_before_the_next_trial(engine_path, cli, tmp_path):
    workload = write(tmp_path / "w.toml", READS)
    target = tmp_path / "target"
    target.mkdir()
    done = cli("prepare", str(workload), "--target", str(target), "--rate", "10")
    assert done.returncode == 0, done.stderr
    files = sorted(p for p in target.rglob("*") if p.is_file() and not p.name.startswith("."))
    sizes = {p: p.stat().st_size for p in files}
    files[0].unlink()
    files[5].unlink()
    files[9].write_bytes(b"short")
    done = cli(
        "run",
        str(workload),
        "--target",
        str(target),
        "--rate",
        "200",
        "--warmup",
        "0",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert done.returncode == 0, done.stderr
    assert {p: p.stat().st_size if p.exists() else None for p in files} == sizes
    result = json.loads((tmp_path / "r.json").read_text())
    result = result.get("result", result)
    assert all(not figures["errors"] for figures in result["ops"].values()), result["ops"]


def test_a_symlink_planted_in_a_prepared_set_is_refused_before_the_trial(engine_path, cli, tmp_path):
    workload = write(tmp_path / "w.toml", READS)
    target = tmp_path / "target"
    target.mkdir()
    done = cli("prepare", str(workload), "--target", str(target), "--rate", "10")
    assert done.returncode == 0, done.stderr
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    planted = sorted(p for p in target.rglob("*") if p.is_file() and not p.name.startswith("."))[3]
    planted.unlink()
    planted.symlink_to(victim)
    done = cli(
        "run",
        str(workload),
        "--target",
        str(target),
        "--rate",
        "200",
        "--warmup",
        "0",
        "--runtime",
        "1",
        "--db",
        str(tmp_path / "p.db"),
    )
    assert done.returncode != 0
    assert "was changed after it was prepared" in done.stderr and "symbolic links" in done.stderr, done.stderr
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("workload, per_dir", [("specsfs97", 20), ("specsfs2008", 5)])
def test_the_canned_spec_workloads_create_the_symlinks_they_ask_for(engine_path, cli, tmp_path, workload, per_dir):
    target = tmp_path / "target"
    target.mkdir()
    done = cli("prepare", workload, "--target", str(target), "--rate", "5")
    assert done.returncode == 0, done.stderr
    links = [p for p in target.rglob("*") if p.is_symlink()]
    # Every directory that holds files of the set holds its symlinks too.
    directories = {p.parent for p in target.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert len(links) >= per_dir * len(directories) * 0.5, (len(links), len(directories))
    assert all(link.resolve().is_file() and link.resolve().is_relative_to(target.resolve()) for link in links)


# ---- disk space


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small file system needs root")
def test_growing_a_prepared_set_past_the_free_space_is_refused_before_it_fills_the_disk(engine_path, cli, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        done = cli("prepare", "mail", "--target", str(small), "--rate", "10")
        assert done.returncode == 0, done.stderr
        before = sorted(small.rglob("*"))
        done = cli(
            "run", "mail", "--target", str(small), "--rate", "2000", "--runtime", "1", "--db", str(tmp_path / "p.db")
        )
        assert_refused(done, "already there) but", tmp_path)
        assert (
            "field --target: the file set needs about" in done.stderr and "free; lower --rate or --scale" in done.stderr
        )
        assert sorted(small.rglob("*")) == before
    finally:
        subprocess.run(["umount", str(small)], check=True)


# ---- access logs


LINE = '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /d{n}/f{n}.html HTTP/1.0" 200 {size} "-" "-"\n'


def _bad_logs() -> dict:
    import gzip
    import random

    good = "".join(LINE.format(n=n, size=1000 + n) for n in range(2000)).encode()
    whole = gzip.compress(good)
    rng = random.Random(7)
    return {
        "garbage.log": bytes(rng.randrange(256) for _ in range(5000)),
        "words.log": b"hello world\nnot an access log\n",
        "empty.log": b"",
        "truncated.log.gz": whole[: len(whole) // 2],
        "magic.log": b"\x1f\x8b\x08" + b"junk" * 100,
        "huge.log": LINE.format(n=1, size=10**18).encode(),
    }


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("garbage.log", "nothing to replay in"),
        ("words.log", "nothing to replay in 2 lines"),
        ("empty.log", "nothing to replay in 0 lines"),
        ("truncated.log.gz", "after line"),
        ("magic.log", "invalid gzip header"),
        ("huge.log", "the document tree needs 1000000000000000000 bytes but"),
    ],
)
def test_a_bad_access_log_is_refused_and_builds_no_docroot(engine_path, cli, tmp_path, name, fragment):
    log = tmp_path / name
    log.write_bytes(_bad_logs()[name])
    docroot = tmp_path / "www"
    done = cli("replay", "--build-docroot", str(docroot), str(log), timeout=QUICK_S)
    assert_refused(done, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no docroot, no half-built one


def test_a_log_path_that_is_a_directory_is_called_one(cli, tmp_path):
    done = cli("replay", "--build-docroot", str(tmp_path / "www"), str(tmp_path), timeout=QUICK_S)
    assert_refused(done, f"{tmp_path}: is a directory, not an access log")


def test_a_surface_plans_unknown_workload_names_the_plans_line(cli, tmp_path):
    plan = write(
        tmp_path / "s.toml",
        'workload = "webserver"\ntarget = "sim://mail?capacity={c}"\n[[factors]]\nname = "c"\nlevels = "100,200"\n',
    )
    done = cli("surface", str(plan), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(done, f"{plan}:1: field workload: unknown workload 'webserver'", tmp_path)


@pytest.mark.parametrize(
    "bad_path",
    ["/x", "/" + "a" * 300, "/" + "/".join(["d"] * 50_000), "/n\0ul"],
    ids=["a-file-that-is-also-a-directory", "a-name-past-NAME_MAX", "50000-components", "a-NUL"],
)
def test_a_path_no_file_system_can_hold_is_a_counted_bad_path(engine_path, cli, tmp_path, bad_path):
    log = tmp_path / "access.log"
    log.write_text(
        LINE.format(n=1, size=10).replace("/d1/f1.html", bad_path)
        + LINE.format(n=2, size=20).replace("/d2/f2.html", "/x/y")
    )
    docroot = tmp_path / "www"
    done = cli("replay", "--build-docroot", str(docroot), str(log), timeout=QUICK_S)
    assert done.returncode == 0, done.stderr
    assert "2 lines, 1 replayable" in done.stderr and "1 bad paths" in done.stderr, done.stderr
    assert sorted(str(p.relative_to(docroot)) for p in docroot.rglob("*") if not p.name.startswith(".")) == ["x", "x/y"]


@pytest.mark.parametrize(
    "target, levels, fragment",
    [
        ("sim://nosuch?c={c}", "100,200", "sim://nosuch?c=100: sim: unknown surface 'nosuch'"),
        ("sim://?capacity={c}", "-1e308,1e308", "sim://?capacity=-1e+308: sim: parameters"),
    ],
)
def test_a_surface_plans_simulated_target_is_checked_before_a_surface_is_stored(
    cli, tmp_path, target, levels, fragment
):
    plan = write(
        tmp_path / "s.toml", f'workload = "mail"\ntarget = "{target}"\n[[factors]]\nname = "c"\nlevels = "{levels}"\n'
    )
    done = cli("surface", str(plan), "--db", str(tmp_path / "p.db"), timeout=QUICK_S)
    assert_refused(done, f"{plan}:2: field target: {fragment}", tmp_path)


def test_the_target_messages_ask_for_the_same_kind_of_directory(cli, tmp_path):
    done = cli("run", "mail", "--target", str(tmp_path / "new"), "--rate", "10", "--db", str(tmp_path / "p.db"))
    assert_refused(done, "no such directory (peakbench loads an empty directory you made)", tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "thesis.tex").write_text("years of work")
    done = cli("run", "mail", "--target", str(tmp_path / "full"), "--rate", "10", "--db", str(tmp_path / "p.db"))
    assert_refused(done, "name an empty directory", tmp_path)
    assert "new directory" not in done.stderr
