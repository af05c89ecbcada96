"""Bad input on the command line: one line on stderr, exit status 2, nothing written anywhere."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def sandbox(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    return tmp_path, target


def assert_refused(done, sandbox, fragment):
    tmp_path, target = sandbox
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # exactly one line
    assert fragment in done.stderr
    assert list(target.iterdir()) == []
    assert not (tmp_path / "p.db").exists()


def run(cli, sandbox, *args, target=None):
    tmp_path, default_target = sandbox
    return cli(
        "run", *args, "--target", str(target or default_target), "--db", str(tmp_path / "p.db"), "--runtime", "1"
    )


@pytest.mark.parametrize(
    "rate, fragment",
    [
        ("0", "argument --rate: '0': must be a finite number of ops/s above 0"),
        ("-5", "above 0"),
        ("nan", "above 0"),
        ("inf", "above 0"),
        ("1e12", "above 50,000,000 ops/s"),
        ("fast", "'fast' is not a number of ops/s"),
        ("2x", "'2x' is not a number of ops/s; write e.g. 500, 2k or 1.5M"),
        ("60M", "above 50,000,000 ops/s"),
    ],
)
def test_impossible_rates(cli, sandbox, rate, fragment):
    assert_refused(run(cli, sandbox, "web-server", "--rate", rate), sandbox, fragment)


def test_rates_may_be_written_with_k_and_m(cli):
    # `--rate 2k` sizes the file set exactly as `--rate 2000` does.
    written = cli("workloads", "show", "mail", "--rate", "2k")
    assert written.returncode == 0, written.stderr
    assert written.stdout == cli("workloads", "show", "mail", "--rate", "2000").stdout


def test_unknown_workload(cli, sandbox):
    assert_refused(run(cli, sandbox, "webserver", "--rate", "10"), sandbox, "known: db-tp, mail")


def test_workload_typo(cli, sandbox):
    tmp_path, _ = sandbox
    workload = tmp_path / "typo.toml"
    workload.write_text(
        '[fileset]\nfiles_per_dir = 5\ndirs_per_dir = 0\nmax_depth = 0\nfile_size = "4KiB"\n'
        "[scaling]\nfiles_per_op = 1\n[mix]\nread = 1\n"
    )
    done = run(cli, sandbox, str(workload), "--rate", "10")
    assert_refused(
        done, sandbox, f"{workload}:5: field fileset.file_size: unknown key 'file_size'; did you mean 'file_sizes'?"
    )


def test_missing_target(cli, sandbox):
    tmp_path, _ = sandbox
    done = run(cli, sandbox, "mail", "--rate", "10", target=tmp_path / "nope")
    assert_refused(done, sandbox, f"field --target: {tmp_path / 'nope'}: no such directory")


def test_unsupported_target_scheme(cli, sandbox):
    done = run(cli, sandbox, "mail", "--rate", "10", target="ftp://127.0.0.1/export")
    assert_refused(done, sandbox, "ftp:// targets are not supported yet")


def test_a_directory_peakbench_did_not_create(cli, sandbox):
    tmp_path, target = sandbox
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    done = run(cli, sandbox, "mail", "--rate", "10", target=precious)
    assert_refused(done, sandbox, "is not empty and peakbench did not create it")
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]


def test_a_file_set_larger_than_the_disk(cli, sandbox):
    done = run(cli, sandbox, "peer-to-peer", "--rate", "1000", "--scale", "1e9")
    assert_refused(done, sandbox, "free; lower --rate or --scale")


def test_bad_durations_and_counts(cli, sandbox):
    assert_refused(run(cli, sandbox, "mail", "--rate", "10", "--warmup", "soon"), sandbox, "'soon' is not a duration")
    assert_refused(run(cli, sandbox, "mail", "--rate", "10", "--max-outstanding", "0"), sandbox, "must be at least 1")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only file system needs root")
def test_a_read_only_file_system(cli, sandbox):
    tmp_path, _ = sandbox
    readonly = tmp_path / "ro"
    readonly.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(readonly)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        done = run(cli, sandbox, "mail", "--rate", "10", target=readonly)
        assert_refused(done, sandbox, f"{readonly}: the file system is mounted read-only")
    finally:
        subprocess.run(["umount", str(readonly)], check=True)


def test_prepare_refuses_bad_input_the_same_way(cli, sandbox):
    tmp_path, target = sandbox
    done = cli("prepare", "mail", "--target", str(tmp_path / "nope"), "--rate", "10")
    assert_refused(done, sandbox, "no such directory")


@pytest.mark.integration
def test_a_refused_command_line_does_not_wait_for_scipy_to_import():
    # scipy.stats alone takes seconds to import; a typo should be answered before that. The refusal
    # runs in a fresh interpreter, which reports whether anything imported scipy along the way.
    probe = (
        "import sys\n"
        "from peakbench import cli\n"
        "try:\n"
        "    status = cli.main(['run', 'mail', '--target', 'x', '--rate', 'fast'])\n"
        "except SystemExit as refused:\n"
        "    status = refused.code\n"
        "print(status, 'scipy' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr
