import math
from pathlib import Path

import pytest
from peakbench.errors import InputError
from peakbench.workload import canned_names, find_workload, load_workload, trial_spec

MINIMAL = """name = "tiny"
description = "for tests"

[fileset]
files_per_dir = 10
dirs_per_dir = 2
max_depth = 2
file_sizes = "10KB"

[scaling]
bytes_per_op = "100KB"
min_files = 20

[mix]
read = 2
write = 1
"""


def workload_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = workload_file(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_workload(path)
    return str(caught.value).replace(str(path), "w.toml")


def test_a_typo_is_an_error_at_its_line_with_a_suggestion(tmp_path):
    text = MINIMAL.replace("files_per_dir", "files_per_dri")
    assert (
        error_of(tmp_path, text) == "w.toml:5: field fileset.files_per_dri: unknown key 'files_per_dri'; "
        "did you mean 'files_per_dir'?"
    )


def test_unknown_tables_and_ops_are_errors(tmp_path):
    assert error_of(tmp_path, MINIMAL + "[lod]\narrivals = 'poisson'\n").startswith(
        "w.toml:17: field lod: unknown key 'lod'; did you mean 'load'?"
    )
    assert error_of(tmp_path, MINIMAL + "getatr = 5\n").startswith(
        "w.toml:17: field mix.getatr: unknown key 'getatr'; did you mean 'getattr'?"
    )


def test_semantic_errors_point_at_the_offending_key(tmp_path):
    text = MINIMAL.replace('file_sizes = "10KB"', 'file_sizes = {kind = "lognormal", mean = "1KB", median = "2KB"}')
    assert error_of(tmp_path, text) == "w.toml:8: field fileset.file_sizes: needs 0 < median <= mean"
    text = MINIMAL + '[read]\npattern = "append"\n'
    assert error_of(tmp_path, text) == (
        "w.toml:18: field read.pattern: must be one of random, sequential, whole_file (got 'append')"
    )


def test_toml_syntax_errors_keep_their_line(tmp_path):
    message = error_of(tmp_path, MINIMAL.replace("max_depth = 2", "max_depth = = 2"))
    assert message.startswith("w.toml:7: invalid TOML: ")


def test_missing_pieces(tmp_path):
    assert error_of(tmp_path, MINIMAL.replace('file_sizes = "10KB"\n', "")) == (
        "w.toml:4: field fileset.file_sizes: [fileset] needs 'file_sizes'"
    )
    both = MINIMAL.replace('bytes_per_op = "100KB"', 'bytes_per_op = "100KB"\nfiles_per_op = 3')
    assert error_of(tmp_path, both) == "w.toml:10: field scaling: give exactly one of files_per_op or bytes_per_op"
    assert error_of(tmp_path, MINIMAL.replace("read = 2\nwrite = 1", "read = 0")) == (
        "w.toml:14: field mix: the mix has no op with a weight above 0"
    )


def test_weights_are_normalised_and_the_normalisation_is_reported(tmp_path):
    workload = load_workload(workload_file(tmp_path, MINIMAL))
    assert workload.mix == pytest.approx({"read": 2 / 3, "write": 1 / 3})
    assert workload.mix_note == "mix sums to 3, not 100; normalised to 100%"
    assert find_workload("web-proxy").mix_note == "mix sums to 101, not 100; normalised to 100%"
    assert find_workload("specsfs97").mix_note == "mix sums to 99, not 100; normalised to 100%"
    assert find_workload("web-server").mix_note is None  # already 100%
    for name in canned_names():
        assert math.fsum(find_workload(name).mix.values()) == pytest.approx(1, abs=1e-12)


def test_self_scaling_by_bytes_and_by_files(tmp_path):
    workload = load_workload(workload_file(tmp_path, MINIMAL))
    # 100 KB per op/s over 10 KB files: 10 files per op/s, at least 20.
    assert workload.files_at(50) == 500
    assert workload.files_at(50, scale=2) == 1000
    assert workload.files_at(1) == 20
    assert workload.bytes_at(50) == 500 * 10_000
    by_files = load_workload(workload_file(tmp_path, MINIMAL.replace('bytes_per_op = "100KB"', "files_per_op = 2.5")))
    assert by_files.files_at(100) == 250
    assert by_files.files_at(100.1) == 251  # never fewer files than asked for


def test_specsfs2008_scales_a_thousandth_of_spec(tmp_path):
    workload = find_workload("specsfs2008")
    # --scale 1000 gives SPECsfs2008's own 120 MB per op/s.
    assert workload.bytes_at(100, scale=1000) == pytest.approx(100 * 120e6, rel=0.001)


def test_a_file_set_needs_a_finite_mean_file_size(tmp_path):
    text = MINIMAL.replace('file_sizes = "10KB"', 'file_sizes = {kind = "pareto", alpha = 0.9, scale = "1KB"}')
    assert error_of(tmp_path, text).startswith("w.toml:8: field fileset.file_sizes: the mean file size is infinite")


def test_histogram_and_mix_files_are_found_next_to_the_workload(tmp_path):
    (tmp_path / "sizes.dist").write_text("1KiB:1\n3KiB:1\n")
    (tmp_path / "m.mix").write_text("SFS MIXFILE VERSION 2\nread 60%\ngetattr 40%\n")
    text = MINIMAL.replace('file_sizes = "10KB"', 'file_sizes = {kind = "histogram", file = "sizes.dist"}')
    text = text.replace("read = 2\nwrite = 1", 'mixfile = "m.mix"')
    workload = load_workload(workload_file(tmp_path, text))
    assert workload.mean_file_size == 2048
    assert workload.mix == {"read": 0.6, "getattr": 0.4}
    assert workload.mix_note is None


def test_trial_spec_carries_the_load_and_the_scaled_file_set(tmp_path):
    workload = load_workload(workload_file(tmp_path, MINIMAL))
    spec = trial_spec(workload, {"kind": "null"}, rate=50, warmup_s=1, runtime_s=2, seed=9, arrivals="poisson")
    assert spec["schema"] == "peakbench.trial-spec/1"
    assert spec["load"]["rate"] == 50 and spec["load"]["arrivals"] == "poisson"
    assert spec["seed"] == 9
    assert spec["fileset"]["files"] == 500
    assert spec["fileset"]["file_sizes"] == {"kind": "constant", "value": 10_000}
    assert spec["read"] == {"size": {"kind": "constant", "value": 8192}, "pattern": "random"}


def test_unknown_workload_lists_the_known_ones():
    with pytest.raises(InputError) as caught:
        find_workload("webserver")
    assert (
        "known: db-tp, mail, news, peer-to-peer, specsfs2008, specsfs2008-cifs, specsfs97, sync-overwrite, web-proxy, web-server"
        in str(caught.value)
    )
