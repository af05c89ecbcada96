"""The canned workloads: each loads, is laptop-sized, and the engine accepts its spec."""

import pytest
from peakbench.engine import Engine
from peakbench.targets import parse_target
from peakbench.workload import canned_names, find_workload, trial_spec

EXPECTED = {
    "specsfs97",
    "specsfs2008",
    "specsfs2008-cifs",
    "web-server",
    "web-proxy",
    "db-tp",
    "peer-to-peer",
    "mail",
    "news",
    "sync-overwrite",
}


def test_all_canned_workloads_ship():
    assert set(canned_names()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_canned_file_sets_fit_a_laptop_at_a_few_hundred_ops(name):
    workload = find_workload(name)
    for rate in (100, 500):
        assert workload.files_at(rate) <= 10_000
        assert workload.bytes_at(rate) <= 200e6


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("target", [{"kind": "null"}, {"kind": "posix", "path": "/nonexistent/validation-only"}])
def test_the_engine_accepts_every_canned_spec(engine_path, name, target):
    if name == "specsfs2008-cifs" and target["kind"] == "posix":
        target = parse_target("smb://u:p@files.example/share")  # its handle ops need SMB
    spec = trial_spec(find_workload(name), target, rate=300, warmup_s=1, runtime_s=5)
    Engine(engine_path).validate(spec)  # raises InputError with the engine's message if refused


def test_workloads_list_and_show(cli):
    listing = cli("workloads", "list")
    assert listing.returncode == 0
    for name in EXPECTED:
        assert name in listing.stdout
    shown = cli("workloads", "show", "web-proxy", "--rate", "300")
    assert shown.returncode == 0
    assert "mix sums to 101, not 100; normalised to 100%" in shown.stdout
    assert f"at 300 ops/s (scale 1): {find_workload('web-proxy').files_at(300)} files" in shown.stdout
    assert "zipf alpha 0.75" in shown.stdout
