"""SPECsfs rc files: the load points they describe, SPEC's rounding, and one-line errors."""

import json
import re
import sqlite3
import xml.etree.ElementTree as ET

import pytest
from peakbench.errors import InputError
from peakbench.report.sections.load_curve import overall_response_time
from peakbench.sfs.rcfile import read_rcfile
from peakbench.sfs.run import plan
from peakbench.sfs.submission import RC_FIELDS, rc_settings
from peakbench.workload import find_workload

SPEC_EXAMPLE = """\
# the User's Guide's example: 10 points ending at 2000 ops/s on 4 clients x 8 procs
LOAD=200
INCR_LOAD="200"
NUM_RUNS=10
CLIENTS="client1 client2 client3 client4"
PROCS=8
MNT_POINTS='{target}'
BIOD_MAX_WRITES=1
"""

# The guide's names for the sfssum columns it defines (§4.4), in order.
SFSSUM_COLUMNS = (
    "requested load",
    "achieved throughput",
    "average response time",
    "total logical operations",
    "test time",
    "file server protocol",
    "network protocol",
    "IP version",
    "total file set size (KB)",
    "number of load generators",
)
# The guide's rc variables (§3.3, §3.3.1) an NFS run's report shows: all but the aliases INCR_LOAD
# (LOAD shows the expanded list) and NUM_PROCS (PROCS), the CIFS-only USERNAME, PASSWORD and DOMAIN,
# and SFS_DIR and WORK_DIR (SPEC's program directories); WORKLOAD is peakbench's own.
GUIDE_RC_VARIABLES = {
    "LOAD", "NUM_RUNS", "CLIENTS", "PROCS", "MNT_POINTS", "FS_PROTOCOL", "TCP", "SFS_NFS_USER_ID",
    "SFS_NFS_GROUP_ID", "BIOD_MAX_READS", "BIOD_MAX_WRITES", "WARMUP_TIME", "RUNTIME", "INIT_TIMEOUT",
    "BLOCK_SIZE", "MIXFILE", "ACCESS_PCNT", "PRIME_MON_SCRIPT", "PRIME_MON_ARGS", "DEBUG",
}  # fmt: skip


def write(tmp_path, text: str):
    path = tmp_path / "sfs_rc"
    path.write_text(text.format(target=tmp_path))
    return path


def test_spec_rounding_reproduces_the_users_guide(tmp_path):
    rc = read_rcfile(write(tmp_path, SPEC_EXAMPLE))
    assert rc.processes == 32 and rc.clients == ("client1", "client2", "client3", "client4")
    assert rc.loads(spec_rounding=True) == [192, 384, 576, 800, 992, 1184, 1376, 1600, 1792, 1984]
    assert rc.loads() == [200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000]  # the exact split
    assert rc.biod_writes == 1 and rc.ignored == ()
    assert rc.warmup_s == 300 and rc.runtime_s == 300  # SPEC's defaults


def test_an_explicit_load_list_and_durations(tmp_path):
    rc = read_rcfile(write(tmp_path, 'LOAD="100 300 700"\nMNT_POINTS={target}\nWARMUP_TIME=2m\nRUNTIME=90\n'))
    assert rc.loads() == [100, 300, 700] and rc.warmup_s == 120 and rc.runtime_s == 90
    assert rc.procs == 1 and rc.clients == ("localhost",)


@pytest.mark.parametrize(
    "text, line, field, words",
    [
        ("LOAD=abc\nMNT_POINTS=/x\n", 1, "LOAD", "'abc' is not a number"),
        ("LOAD=100\nMNT_PIONTS=/x\n", 2, "MNT_PIONTS", "did you mean MNT_POINTS?"),
        ("LOAD=100\nINCR_LOAD=100\nMNT_POINTS=/x\n", 2, "INCR_LOAD", "needs NUM_RUNS"),
        ("LOAD=100\nPROCS=3\nMNT_POINTS='/a /b'\n", 3, "MNT_POINTS", "2 mount points for 3 procs"),
        ("LOAD=100\nPROCS=0\nMNT_POINTS=/x\n", 2, "PROCS", "whole number of at least 1"),
        ("LOAD='300 100'\nMNT_POINTS=/x\n", 1, "LOAD", "must increase"),
        ("MNT_POINTS=/x\n", None, "LOAD", "LOAD is required"),
        ("LOAD=100\nthis is not an assignment\n", 2, None, "expected NAME=value"),
        ("LOAD=100\nRUNTIME=5k\nMNT_POINTS=/x\n", 2, "RUNTIME", "not a duration"),
    ],
)
def test_bad_lines_name_the_file_line_and_field(tmp_path, text, line, field, words):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as raised:
        read_rcfile(path)
    error = raised.value
    assert words in str(error)
    assert (error.file, error.line, error.field) == (path, line, field)


def test_a_rounding_that_leaves_a_process_nothing_is_refused(tmp_path):
    rc = read_rcfile(write(tmp_path, 'LOAD=20\nCLIENTS="a b c d"\nPROCS=8\nMNT_POINTS={target}\n'))
    with pytest.raises(InputError, match="rounds down to 0 ops/s per process"):
        rc.loads(spec_rounding=True)


def test_the_command_prints_the_points_or_one_line_errors(cli, tmp_path):
    (tmp_path / "target").mkdir()
    good = write(tmp_path, SPEC_EXAMPLE.replace("MNT_POINTS='{target}'", "MNT_POINTS='{target}/target'"))
    done = cli("sfs", str(good), "--spec-rounding", "--dry-run", "--db", str(tmp_path / "p.db"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == "192 384 576 800 992 1184 1376 1600 1792 1984".split()
    assert "SPEC recommends 10 to 250" in done.stderr  # 6 ops/s per process at the lowest point
    bad = tmp_path / "bad_rc"
    bad.write_text("LOAD=100\nMIXFILE=missing.mix\nMNT_POINTS=/nonexistent-dir\n")
    done = cli("sfs", str(bad), "--db", str(tmp_path / "p.db"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "missing.mix" in done.stderr
    bad.write_text(f"LOAD=100\nMNT_POINTS={tmp_path}\n")  # not empty, and not peakbench's
    done = cli("sfs", str(bad), "--db", str(tmp_path / "p.db"))
    assert done.returncode == 2 and f"{bad}:2: field MNT_POINTS: " in done.stderr
    assert not (tmp_path / "p.db").exists()


def test_processes_on_several_mount_points_run_as_one_load_client_each(engine_path, cli, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    rc = tmp_path / "sfs_rc"
    # 3 procs: one on the first directory, two on the second (a mount point may repeat)
    rc.write_text(f"LOAD='90 180'\nPROCS=3\nMNT_POINTS='{one} {two} {two}'\nWARMUP_TIME=0.5\nRUNTIME=1\n")
    db = tmp_path / "p.db"
    # Both clients are worker processes on this machine, whose clocks agree; a loaded machine's slow
    # round trips only blur the measurement of that, so the skew bound is wider than the default.
    done = cli("sfs", str(rc), "--db", str(db), "--clock-tolerance", "200")
    assert done.returncode == 0, done.stderr
    assert "2 load clients, one per mount point: 1 procs on " in done.stderr
    with sqlite3.connect(db) as connection:
        results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
    # One stored trial per load point: the two clients' results merged, each offering its procs' share.
    assert [r["requested_rate"] for r in results] == [90, 180]
    for result in results:
        rate = result["requested_rate"]
        assert [c["requested_rate"] for c in result["clients"]] == pytest.approx([rate / 3, rate * 2 / 3])
        assert result["achieved_rate"] == sum(c["achieved_rate"] for c in result["clients"])
    manifests = [json.loads((d / ".peakbench-manifest.json").read_text()) for d in (one, two)]
    files = [sum(fileset["complete_files"] for fileset in m["filesets"].values()) for m in manifests]
    assert 0 < files[0] < files[1]  # each directory holds its client's file set, sized by its procs
    # The report shows every client of every load point beside the merged curve.
    page = tmp_path / "report.html"
    shown = cli("report", "sfs:1", "--db", str(db), "--html", str(page))
    assert shown.returncode == 0, shown.stderr
    assert "Load clients of each distributed trial" in page.read_text()
    names = [c["name"] for c in results[0]["clients"]]
    rows = [line for line in shown.stdout.splitlines() if any(f" {name} " in line for name in names)]
    assert len(rows) == 4  # 2 load points x 2 clients


# Every rc variable of the guide (§1.3, §3.3, §3.3.1): honoured, or refused with a one-line reason.


def test_mount_points_as_nfs_exports_and_per_proc_per_client_lists(tmp_path):
    rc = read_rcfile(write(tmp_path, 'LOAD=100\nCLIENTS="c1 c2"\nPROCS=2\nMNT_POINTS="srv:/a srv:/b srv:/c srv:/a"\n'))
    assert rc.mount_points == ("nfs://srv/a", "nfs://srv/b", "nfs://srv/c", "nfs://srv/a")
    rc = read_rcfile(write(tmp_path, 'LOAD=100\nCLIENTS="c1 c2"\nPROCS=2\nMNT_POINTS="srv:/a srv:/b"\n'))
    assert rc.mount_points == ("nfs://srv/a", "nfs://srv/b") * 2  # one per proc: every client uses both


def test_a_mount_point_file_names_each_clients_mount_points(tmp_path):
    (tmp_path / "mnt.txt").write_text("# client paths\nc2 srv:/x srv:/y\nc1 srv:/a srv:/a\n")
    rc = read_rcfile(write(tmp_path, 'LOAD=100\nCLIENTS="c1 c2"\nPROCS=2\nMNT_POINTS=mnt.txt\n'))
    assert rc.mount_points == ("nfs://srv/a", "nfs://srv/a", "nfs://srv/x", "nfs://srv/y")
    for text, line, words in [
        ("c1 srv:/a srv:/a\nc3 srv:/a srv:/a\n", 2, "client 'c3' is not in CLIENTS"),
        ("c1 srv:/a\n", 1, "1 mount points for c1's 2 procs"),
        ("c1 srv:/a srv:/a\r\nc2 srv:/a srv:/a\r\n", 1, "carriage return"),
        ("c1 srv:/a srv:/a\n", None, "no line for client(s) c2"),
    ]:
        (tmp_path / "mnt.txt").write_text(text)
        with pytest.raises(InputError, match=re.escape(words)) as raised:
            read_rcfile(tmp_path / "sfs_rc")
        assert (raised.value.file, raised.value.line) == (tmp_path / "mnt.txt", line)


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("FS_PROTOCOL=cifs\n", "FS_PROTOCOL", "FS_PROTOCOL=cifs needs USERNAME, the SMB login"),
        ("FS_PROTOCOL=afs\n", "FS_PROTOCOL", "must be nfs or cifs"),
        ("USERNAME=bob\n", "USERNAME", "for CIFS shares"),
        ("PASSWORD=x\n", "PASSWORD", "for CIFS shares"),
        ("DOMAIN=WG\n", "DOMAIN", "for CIFS shares"),
        ("TCP=off\n", "TCP", "UDP is not"),
        ("SFS_NFS_USER_ID=1000\n", "SFS_NFS_USER_ID", "applies to NFS mount points"),
        ("SFS_NFS_GROUP_ID=x\n", "SFS_NFS_GROUP_ID", "not a whole number"),
        ("BLOCK_SIZE=32\n", "BLOCK_SIZE", "applies to NFS mount points"),
        ("BIOD_MAX_READS=33\n", "BIOD_MAX_READS", "more than 32"),
        ("BIOD_MAX_WRITES=2\n", "BIOD_MAX_WRITES", "applies to NFS mount points"),
        ("ACCESS_PCNT=130\n", "ACCESS_PCNT", "percentage"),
        ("INIT_TIMEOUT=0\n", "INIT_TIMEOUT", "longer than 0"),
        ("PRIME_MON_SCRIPT=missing.sh\n", "PRIME_MON_SCRIPT", "not an executable file"),
        ("PRIME_MON_ARGS=-x\n", "PRIME_MON_ARGS", "without PRIME_MON_SCRIPT"),
        ("DEBUG=3,4\n", "DEBUG", "flag 3 has no peakbench log line"),
        ("DEBUG=8-x\n", "DEBUG", "not a flag number"),
    ],
)
def test_variables_without_a_meaning_here_are_refused_at_their_line(tmp_path, text, field, words):
    path = write(tmp_path, "LOAD=100\nMNT_POINTS={target}\n" + text)
    with pytest.raises(InputError, match=words) as raised:
        read_rcfile(path)
    assert (raised.value.file, raised.value.line, raised.value.field) == (path, 3, field)


def test_a_cifs_share_without_fs_protocol_cifs_is_refused_not_run_as_something_else(tmp_path):
    path = write(tmp_path, "LOAD=100\nMNT_POINTS='\\\\server\\share'\n")
    with pytest.raises(InputError, match=r"\\\\server\\share is a CIFS share; set FS_PROTOCOL=cifs") as raised:
        read_rcfile(path)
    assert raised.value.line == 2


def test_nfs_variables_reach_the_target_and_access_pcnt_the_file_set(tmp_path):
    rc = write(
        tmp_path,
        "LOAD='10 20'\nMNT_POINTS=127.0.0.1:/export\nSFS_NFS_USER_ID=1000\nSFS_NFS_GROUP_ID=100\n"
        "BLOCK_SIZE=32\nTCP=on\nACCESS_PCNT=10\nBIOD_MAX_READS=0\nDEBUG=4,12\nINIT_TIMEOUT=90\n",
    )
    chosen = plan(rc, spec_rounding=False)
    target = chosen.target
    assert (target["kind"], target["host"], target["export"]) == ("nfs", "127.0.0.1", "/export")
    assert (target["uid"], target["gid"], target["rsize"], target["wsize"]) == (1000, 100, 32768, 32768)
    assert chosen.workload.fileset["active_fraction"] == 0.1
    assert chosen.rc.debug == {4, 12} and chosen.rc.init_timeout_s == 90
    settings = chosen.settings()
    assert (settings["block_size"], settings["access_share"], settings["biod_max_reads"]) == (32768, 0.1, 0)


def test_nfs_variables_appear_under_their_rc_names(tmp_path):
    rc = tmp_path / "sfs_rc"
    rc.write_text(
        "LOAD=100\nINCR_LOAD=100\nNUM_RUNS=3\nCLIENTS='a b'\nNUM_PROCS=2\nMNT_POINTS=server:/export\n"
        "SFS_NFS_USER_ID=1000\nSFS_NFS_GROUP_ID=100\nBLOCK_SIZE=32\nBIOD_MAX_READS=4\nBIOD_MAX_WRITES=2\n"
        "TCP=on\n"
    )
    shown = rc_settings(plan(rc, spec_rounding=False).settings())
    assert shown["LOAD"] == ["100", "200", "300"] and shown["NUM_RUNS"] == 3
    assert (shown["CLIENTS"], shown["PROCS"], shown["MNT_POINTS"]) == (["a", "b"], 2, ["server:/export"] * 4)
    assert (shown["SFS_NFS_USER_ID"], shown["SFS_NFS_GROUP_ID"], shown["BLOCK_SIZE"]) == (1000, 100, "32")
    assert (shown["BIOD_MAX_READS"], shown["BIOD_MAX_WRITES"], shown["FS_PROTOCOL"], shown["TCP"]) == (4, 2, "nfs", 1)


def test_monitor_debug_and_init_timeout_in_a_run(engine_path, cli, tmp_path):
    target = tmp_path / "sfs"
    target.mkdir()
    monitor = tmp_path / "mon.sh"
    monitor.write_text(
        "#!/bin/sh\necho \"started $1\"\ntrap 'echo stopped; exit 0' TERM\nwhile :; do sleep 0.05; done\n"
    )
    monitor.chmod(0o755)
    rc = tmp_path / "sfs_rc"
    rc.write_text(
        f"LOAD='20 40'\nCLIENTS='c1 c2'\nMNT_POINTS={target}\nWARMUP_TIME=0.5\nRUNTIME=1\nPRIME_MON_SCRIPT=mon.sh\n"
        "PRIME_MON_ARGS=disk\nDEBUG=4,12\nACCESS_PCNT=50\nINIT_TIMEOUT=120\n"
    )
    db = tmp_path / "p.db"
    done = cli("sfs", str(rc), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "debug 12: point 2: " in done.stderr and "50% accessed" in done.stderr
    assert "debug 4: point 1: failed operations: none" in done.stderr
    for number in (1, 2):  # started after the warm-up of each point, stopped at its end, kept beside the store
        output = tmp_path / "p-sfs-1" / f"point-{number}-monitor.txt"
        assert output.read_text().split() == ["started", "disk", "stopped"]
    with sqlite3.connect(db) as connection:
        notes = [json.loads(n) for (n,) in connection.execute("SELECT notes FROM trials ORDER BY id")]
    assert notes[1] == [f"PRIME_MON_SCRIPT output: {tmp_path / 'p-sfs-1' / 'point-2-monitor.txt'}"]
    # SPEC's outputs: the sfssum file beside the store in the guide's columns (§4.4), and the warnings.
    assert "warning: 2 load points; a publishable SPECsfs2008 curve has at least 10" in done.stderr
    assert "ops/s per process; SPEC recommends" not in done.stderr  # 10 to 20: inside SPEC's 10-250
    with sqlite3.connect(db) as connection:
        results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
    lines = (tmp_path / "p-sfs-1" / "sfssum.1").read_text().splitlines()
    assert len(lines) == len(results) == 2
    for line, result in zip(lines, results):
        row = dict(zip(SFSSUM_COLUMNS, line.split()))
        assert float(row["requested load"]) == result["requested_rate"]
        assert float(row["achieved throughput"]) == round(result["achieved_rate"])
        assert float(row["average response time"]) == round(result["latency"]["mean_ms"], 1)
        assert int(row["total logical operations"]) == result["latency"]["count"]
        assert float(row["test time"]) == result["runtime_s"]
        # a local directory: no file-server protocol of SPEC's, no network, no IP
        assert (row["file server protocol"], row["network protocol"], row["IP version"]) == ("POSIX", "-", "-")
        assert int(row["total file set size (KB)"]) == round(result["fileset"]["bytes"] / 1024)
        assert int(row["number of load generators"]) == 2  # CLIENTS
        # peakbench's columns after the guide's ten: procs, BIOD_MAX_READS and _WRITES, the version
        assert line.split()[10:] == ["1", "1", "1", "2008"]
        # right-aligned like the guide's sample, `            320     321     1.5    96187  299 CIFS ...`
        assert [m.end() for m in re.finditer(r"\S+", line)][:5] == [15, 23, 31, 40, 45]
    # The submission report: the rc file under the guide's variable names, and the §5 result fields.
    shown = cli("report", "sfs:1", "--db", str(db), "--submission", str(tmp_path / "sub"))
    assert shown.returncode == 0, shown.stderr
    root = ET.parse(tmp_path / "sub.xml").getroot()
    settings = {f.get("name"): f.text or "" for f in root.find("rc_settings")}
    assert list(settings) == list(RC_FIELDS) and set(settings) == GUIDE_RC_VARIABLES | {"WORKLOAD"}
    assert (settings["LOAD"], settings["NUM_RUNS"], settings["CLIENTS"], settings["PROCS"]) == (
        "20 40",
        "2",
        "c1 c2",
        "1",
    )
    assert settings["MNT_POINTS"] == f"{target} {target}" and settings["WORKLOAD"] == "specsfs2008"
    assert (settings["DEBUG"], settings["ACCESS_PCNT"], settings["INIT_TIMEOUT"]) == ("4,12", "50", "120.0")
    assert (settings["PRIME_MON_SCRIPT"], settings["PRIME_MON_ARGS"]) == (str(monitor), "disk")
    assert (settings["WARMUP_TIME"], settings["RUNTIME"], settings["FS_PROTOCOL"], settings["TCP"]) == (
        "0.5", "1.0", "nfs", "1")  # fmt: skip
    assert settings["BLOCK_SIZE"] == settings["SFS_NFS_USER_ID"] == settings["MIXFILE"] == ""
    text = [line.rstrip() for line in (tmp_path / "sub.txt").read_text().splitlines()]
    for name, value in settings.items():  # the text report shows the same fields
        assert f"  {name:<26} {value}".rstrip() in text
    assert "  2 load points; a publishable SPECsfs2008 curve has at least 10" in text
    points = [(r["achieved_rate"], r["latency"]["mean_ms"]) for r in results]
    result = {f.get("name"): f.text for f in root.find("result")}
    assert result["load points"] == "2"
    assert result["overall response time ms"] == f"{overall_response_time(points):.3f}"
    assert result["peak achieved ops/s"].startswith(f"{max(a for a, _ in points):.1f} ")
    assert [p.get("requested_ops_per_s") for p in root.find("load_points")] == ["20", "40"]
    assert len(root.find("system_under_test")) > 0
    assert "120 MB" in {f.get("name"): f.text for f in root.find("run")}["file set size"]
    # A file set that cannot be built within INIT_TIMEOUT ends the curve with that verdict.
    slow = tmp_path / "slow_rc"
    slow.write_text(f"LOAD=5000\nMNT_POINTS={tmp_path / 'other'}\nINIT_TIMEOUT=0.01\nRUNTIME=1\n")
    (tmp_path / "other").mkdir()
    done = cli("sfs", str(slow), "--db", str(db))
    assert done.returncode != 0
    assert f"was not built within INIT_TIMEOUT = 0.01 s ({slow}:3)" in done.stderr


def test_a_spec_mixfile_wherever_a_mix_is_expected(engine_path, cli, tmp_path):
    mix = tmp_path / "reads.mix"
    mix.write_text("SFS MIXFILE VERSION 2\n# reads only\nread 60%\ngetattr 40%\n")
    # A .mix in place of a workload: its mix on SPECsfs2008's file set (30% of the files accessed).
    bare = find_workload(str(mix))
    assert (bare.name, bare.mix, bare.fileset["active_fraction"]) == (
        "specsfs2008+reads.mix",
        {"read": 0.6, "getattr": 0.4},
        0.3,
    )
    db = tmp_path / "p.db"
    done = cli("run", "web-server", "--mixfile", str(mix), "--target", "null://", "--rate", "20",
               "--warmup", "0", "--runtime", "1", "--db", str(db))  # fmt: skip
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as connection:
        ((workload, spec),) = connection.execute("SELECT workload, spec FROM trials").fetchall()
    # the mix is the file's, the file set the web server's (every file accessed)
    assert workload == "web-server+reads.mix" and json.loads(spec)["mix"] == {"read": 0.6, "getattr": 0.4}
    assert json.loads(spec)["fileset"]["active_fraction"] == 1.0
    (tmp_path / "c").mkdir()
    rc = tmp_path / "sfs_rc"
    rc.write_text(f"LOAD=10\nMNT_POINTS={tmp_path / 'c'}\n")
    done = cli("sfs", str(rc), "--mixfile", str(mix), "--scale", "1000", "--dry-run", "--db", str(db))
    assert done.returncode == 0 and f"mix from {mix}" in done.stderr, done.stderr
    assert "file set: 120 MB of file set per op/s (scale 1000; SPECsfs2008 uses 120 MB)" in done.stderr
    rc.write_text(f"LOAD=10\nMIXFILE=reads.mix\nMNT_POINTS={tmp_path / 'c'}\n")
    with pytest.raises(InputError, match="the rc file sets MIXFILE and --mixfile names") as raised:
        plan(rc, spec_rounding=False, mixfile=mix)
    assert (raised.value.line, raised.value.field) == (2, "MIXFILE")


def test_validate_checks_every_mount_point_then_an_nfs_export_runs(engine_path, cli, nfs_url, tmp_path):
    export = nfs_url.removeprefix("nfs://").replace("/", ":/", 1)  # SPEC's server:/path
    local = tmp_path / "local"
    local.mkdir()
    rc = tmp_path / "sfs_rc"
    rc.write_text(f"LOAD=20\nPROCS=2\nMNT_POINTS='{export} {local}'\nWARMUP_TIME=0\nRUNTIME=1\n")
    done = cli("sfs", str(rc), "--validate", "--db", str(tmp_path / "p.db"))
    assert done.returncode == 0, done.stderr
    assert f"validation of {export} ({nfs_url}; {rc}:3)" in " ".join(done.stdout.split())
    assert f"validation of {local}" in done.stdout and done.stdout.count("all operations passed") == 2
    assert not (tmp_path / "p.db").exists() and not any(local.iterdir())  # no load, nothing left behind
    rc.write_text(
        f"LOAD=20\nMNT_POINTS={export}\nSFS_NFS_USER_ID=0\nBLOCK_SIZE=4\nBIOD_MAX_READS=4\nBIOD_MAX_WRITES=3\n"
        "WARMUP_TIME=0\nRUNTIME=1\n"
    )
    done = cli("sfs", str(rc), "--db", str(tmp_path / "p.db"))
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "p.db") as connection:
        ((spec, result),) = [
            (json.loads(s), json.loads(r)) for s, r in connection.execute("SELECT spec, result FROM trials")
        ]
    target = spec["target"]
    assert (target["url"], target["rsize"], target["wsize"]) == (nfs_url, 4096, 4096)
    assert (target["biod_reads"], target["biod_writes"]) == (4, 3)
    # 8 KiB reads and writes in 4 KiB transfers, up to 4 and 3 in flight: every one answered correctly
    assert result["outcomes"]["errors"] == 0 and result["ops"]["read"]["successes"] > 0
    (line,) = (tmp_path / "p-sfs-1" / "sfssum.1").read_text().splitlines()
    assert line.split()[5:8] == ["NFS3", "T", "4"]


def test_with_a_cluster_each_clients_processes_go_to_a_worker_on_that_host(tmp_path):
    from peakbench.cluster.connection import LoadClient, LoadCluster
    from peakbench.sfs.run import _workers_for

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    path = write(tmp_path, "LOAD=100\nCLIENTS='hostb hosta'\nPROCS=2\nMNT_POINTS='{target}/one {target}/two'\n")
    chosen = plan(path, spec_rounding=False, by_client=True)
    assert [(g.client, g.mount.written[-3:], g.procs) for g in chosen.groups] == [
        ("hostb", "one", 1),
        ("hostb", "two", 1),
        ("hosta", "one", 1),
        ("hosta", "two", 1),
    ]
    workers = [
        LoadClient(f"client-{i}", f"tcp://w{i}", host, i) for i, host in enumerate(["hosta"] * 2 + ["hostb"] * 2)
    ]
    picked = _workers_for(chosen, LoadCluster(None, workers))
    assert [w.worker for w in picked] == ["tcp://w2", "tcp://w3", "tcp://w0", "tcp://w1"]
    with pytest.raises(InputError, match="client hostb .* has no free Dask worker on its host") as raised:
        _workers_for(chosen, LoadCluster(None, workers[:3]))
    assert (raised.value.line, raised.value.field) == (2, "CLIENTS")
