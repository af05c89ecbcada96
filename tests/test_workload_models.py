"""Fstress's workload models (Figure 3) and regenerated distributions: `peakbench workloads model` and
`derive` write workload files that reproduce the paper's Table 2, change one dimension at a time, run,
and refuse bad values with the field named."""

import json
import math

import pytest
from conftest import run_cli
from peakbench import distributions
from peakbench.cli import main as peakbench
from peakbench.workload import find_workload, load_workload

# Table 2's proxy mix as the model reads it: H = getattr/(getattr+lookup) = 18/32,
# D = read/(lookup·n) = 6/28 with n = 2 reads per file.
PROXY_TABLE2 = ("--memory-hit", "0.5625", "--disk-hit", str(6 / 28))


def model(capsys, tmp_path, *args) -> tuple[int, object, str]:
    """`peakbench workloads ARGS --output FILE` in-process: (exit status, the workload or None, stderr)."""
    out = tmp_path / "out.toml"
    status = peakbench(["workloads", *args, "--output", str(out)])
    return status, load_workload(out) if out.exists() else None, capsys.readouterr().err


def test_the_proxy_and_server_models_give_table_2(capsys, tmp_path):
    status, proxy, _ = model(capsys, tmp_path, "model", "web-proxy", *PROXY_TABLE2)
    assert status == 0
    table2 = find_workload("web-proxy").mix  # the canned workload is Table 2's column
    for op in set(table2) | set(proxy.mix):
        assert proxy.mix.get(op, 0) == pytest.approx(table2.get(op, 0), abs=0.011), op
    assert proxy.read["pattern"] == proxy.write["pattern"] == "sequential"

    status, server, _ = model(capsys, tmp_path, "model", "web-server", "--hit", "0.8")
    assert status == 0
    for op, share in find_workload("web-server").mix.items():
        assert server.mix.get(op, 0) == pytest.approx(share, abs=0.005), op
    assert not {"write", "create", "remove"} & set(server.mix)


def test_hit_rates_move_the_mix_as_figure_3_says(capsys, tmp_path):
    # All memory hits: only time-stamp checks (and the ops the model leaves alone).
    _, hits, _ = model(capsys, tmp_path, "model", "web-proxy", "--memory-hit", "1", "--disk-hit", "0.5")
    assert set(hits.mix) == {"getattr", "access", "readdir", "fsstat"}
    # All misses, all disk hits: a lookup then n reads each; no writes.
    _, reads, _ = model(
        capsys, tmp_path, "model", "web-proxy", "--memory-hit", "0", "--disk-hit", "1", "--reads-per-file", "3"
    )
    assert reads.mix["read"] / reads.mix["lookup"] == pytest.approx(3) and "write" not in reads.mix
    # Disk misses with a cache still filling: create, write, commit, but no evicting remove.
    _, fills, _ = model(
        capsys, tmp_path, "model", "web-proxy", "--memory-hit", "0", "--disk-hit", "0", "--eviction", "none"
    )
    assert fills.mix["create"] == pytest.approx(fills.mix["commit"]) and "remove" not in fills.mix
    assert fills.mix["write"] / fills.mix["create"] == pytest.approx(2)


def test_derive_changes_one_dimension_and_keeps_the_shape(capsys, tmp_path):
    base = find_workload("web-server")
    status, derived, _ = model(
        capsys,
        tmp_path,
        "derive",
        "web-server",
        "--set",
        "zipf=0.95",
        "--set",
        "mean_file_size=21KB",
        "--set",
        "files_per_dir=90",
        "--set",
        "read_write=3:1",
    )
    assert status == 0
    assert derived.fileset["file_popularity"] == {"kind": "zipf", "alpha": 0.95}
    sizes, old = derived.fileset["file_sizes"], base.fileset["file_sizes"]
    assert distributions.mean(sizes) == pytest.approx(21_000)
    # The same lognormal shape (mean:median) and tail cap, twice as large.
    assert sizes["mean"] / sizes["median"] == pytest.approx(old["mean"] / old["median"])
    assert sizes["max"] / old["max"] == pytest.approx(21_000 / distributions.mean(old))
    assert distributions.mean(derived.fileset["files_per_dir"]) == pytest.approx(90)
    assert derived.mix["read"] / derived.mix["write"] == pytest.approx(3)
    assert derived.mix["read"] + derived.mix["write"] == pytest.approx(base.mix["read"])
    assert derived.mix["getattr"] == pytest.approx(base.mix["getattr"])  # the other ops are untouched


def test_a_modelled_workload_runs(tmp_path, capsys, engine_path):
    workload = tmp_path / "proxy.toml"
    assert peakbench(["workloads", "model", "web-proxy", *PROXY_TABLE2, "--output", str(workload)]) == 0
    capsys.readouterr()
    report, target = tmp_path / "run.json", tmp_path / "fs"
    target.mkdir()
    args = ("--rate", "400", "--warmup", "0", "--runtime", "1", "--db", str(tmp_path / "p.db"))
    done = run_cli("run", str(workload), "--target", str(target), *args, "--json", str(report))
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    shares = load_workload(workload).mix
    issued = {op: stats["count"] for op, stats in result["ops"].items()}
    total = sum(issued.values())
    assert total >= 350
    for op, share in shares.items():  # each op's count within 5 binomial standard deviations of its share
        assert abs(issued.get(op, 0) - total * share) <= 5 * math.sqrt(total * share * (1 - share)) + 1, op
    assert result["outcomes"]["errors"] == 0


@pytest.mark.parametrize(
    "args, field",
    [
        (("model", "web-proxy", "--memory-hit", "1.5", "--disk-hit", "0.2"), "--memory-hit"),
        (("model", "web-proxy", "--memory-hit", "0.5", "--disk-hit", "half"), "--disk-hit"),
        (("model", "web-proxy", "--memory-hit", "0.5", "--disk-hit", "0.5", "--eviction", "lru"), "--eviction"),
        (("model", "web-server", "--hit", "0.5", "--reads-per-file", "0"), "--reads-per-file"),
        (("derive", "web-server", "--set", "zipf=-1"), "--set zipf"),
        (("derive", "web-server", "--set", "popularity=1"), "--set"),
        (("derive", "web-server", "--set", "read_write=0:0"), "--set read_write"),
        (("derive", "web-server", "--set", "mean_file_size=12 parsecs"), "--set mean_file_size"),
        (("derive", "web-server", "--set", "reads_per_file=3"), "--set reads_per_file"),
    ],
)
def test_bad_values_exit_2_naming_the_field_and_write_nothing(capsys, tmp_path, args, field):
    status, written, err = model(capsys, tmp_path, *args)
    assert status == 2 and written is None and list(tmp_path.iterdir()) == []
    assert len(err.strip().splitlines()) == 1 and f"field {field}:" in err


def test_an_output_that_is_a_directory_is_refused(capsys, tmp_path):
    assert peakbench(["workloads", "model", "web-server", "--hit", "0.5", "--output", str(tmp_path)]) == 2
    assert "field --output:" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
