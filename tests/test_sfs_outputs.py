"""SPEC's outputs of an sfs run checked against the User's Guide's field lists, field by field: the
sfssum columns (§4.4) against the stored trials, and the submission report's rc settings against the
guide's rc variables (§3.3, §3.3.1) as the rc file set them."""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET

import pytest
from peakbench.report.sections.load_curve import overall_response_time
from peakbench.sfs.rcfile import USED
from peakbench.sfs.run import plan
from peakbench.sfs.submission import RC_FIELDS, rc_settings

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
# rc variables a report cannot show as such: aliases, and the CIFS ones an NFS run refuses.
SHOWN_ELSEWHERE = {"INCR_LOAD": "LOAD", "NUM_PROCS": "PROCS"}
REFUSED_FOR_NFS = {"USERNAME", "PASSWORD", "DOMAIN"}


def test_every_rc_variable_of_the_guide_has_a_field():
    assert set(RC_FIELDS) == set(USED) - set(SHOWN_ELSEWHERE) - REFUSED_FOR_NFS


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


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, engine_path):
    from conftest import run_cli

    folder = tmp_path_factory.mktemp("sfs-outputs")
    (folder / "target").mkdir()
    (folder / "reads.mix").write_text("SFS MIXFILE VERSION 2\nread 50%\ngetattr 50%\n")
    rc = folder / "sfs_rc"
    rc.write_text(
        f"LOAD='20 40'\nCLIENTS='c1 c2'\nPROCS=1\nMNT_POINTS={folder / 'target'}\nMIXFILE=reads.mix\n"
        "ACCESS_PCNT=50\nDEBUG=4\nINIT_TIMEOUT=120\nWARMUP_TIME=0\nRUNTIME=1\n"
    )
    db = folder / "p.db"
    done = run_cli("sfs", str(rc), "--db", str(db))
    assert done.returncode == 0, done.stderr
    shown = run_cli("report", "sfs:1", "--db", str(db), "--submission", str(folder / "sub"))
    assert shown.returncode == 0, shown.stderr
    with sqlite3.connect(db) as connection:
        results = [json.loads(r) for (r,) in connection.execute("SELECT result FROM trials ORDER BY id")]
    return folder, rc, results


def test_sfssum_columns_are_the_guides_field_by_field(finished_run):
    folder, _, results = finished_run
    lines = (folder / "p-sfs-1" / "sfssum.1").read_text().splitlines()
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


def test_the_submission_report_shows_the_rc_file_under_its_names(finished_run):
    folder, rc, results = finished_run
    root = ET.parse(folder / "sub.xml").getroot()
    settings = {f.get("name"): f.text or "" for f in root.find("rc_settings")}
    assert list(settings) == list(RC_FIELDS)
    assert settings["LOAD"] == "20 40" and settings["NUM_RUNS"] == "2"
    assert (settings["CLIENTS"], settings["PROCS"], settings["MNT_POINTS"]) == (
        "c1 c2",
        "1",
        f"{folder / 'target'} {folder / 'target'}",
    )
    assert (settings["MIXFILE"], settings["ACCESS_PCNT"], settings["DEBUG"]) == (str(folder / "reads.mix"), "50", "4")
    assert (settings["WARMUP_TIME"], settings["RUNTIME"], settings["INIT_TIMEOUT"]) == ("0.0", "1.0", "120.0")
    assert settings["BLOCK_SIZE"] == settings["SFS_NFS_USER_ID"] == settings["PRIME_MON_SCRIPT"] == ""
    text = [line.rstrip() for line in (folder / "sub.txt").read_text().splitlines()]
    for name, value in settings.items():  # the text report shows the same fields
        assert f"  {name:<26} {value}".rstrip() in text
    # the §5 result fields: load points, peak and ORT, as the stored trials give them
    points = [(r["achieved_rate"], r["latency"]["mean_ms"]) for r in results]
    result = {f.get("name"): f.text for f in root.find("result")}
    assert result["overall response time ms"] == f"{overall_response_time(points):.3f}"
    assert result["peak achieved ops/s"].startswith(f"{max(a for a, _ in points):.1f} ")
    assert [p.get("requested_ops_per_s") for p in root.find("load_points")] == ["20", "40"]
    assert root.find("system_under_test") is not None and len(root.find("system_under_test")) > 0
