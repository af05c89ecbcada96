import random
from pathlib import Path

import pytest
from peakbench.distributions import mean, parse_distribution, read_histogram_file
from peakbench.errors import InputError


def parse(value, quantity="size", base_dir=Path(".")):
    return parse_distribution(value, field="fileset.file_sizes", quantity=quantity, base_dir=base_dir)


def test_plain_values_are_constants():
    assert parse("8KiB") == {"kind": "constant", "value": 8192}
    assert parse(3, quantity="count") == {"kind": "constant", "value": 3}


def test_inline_tables_convert_units_and_keep_bounds():
    assert parse({"kind": "lognormal", "mean": "10.5KB", "median": "1.3KB", "max": "138MB"}) == {
        "kind": "lognormal",
        "mean": 10_500,
        "median": 1300,
        "max": 138_000_000,
    }
    assert parse({"kind": "bimodal", "first": "5KB", "second": "45KB", "p_first": 0.25}) == {
        "kind": "bimodal",
        "p_first": 0.25,
        "first": {"kind": "constant", "value": 5000},
        "second": {"kind": "constant", "value": 45000},
    }


def test_zipf_is_only_a_popularity():
    assert parse({"kind": "zipf", "alpha": 0.8}, quantity="popularity") == {"kind": "zipf", "alpha": 0.8}
    with pytest.raises(InputError, match="field fileset.file_sizes.kind: zipf describes popularity"):
        parse({"kind": "zipf", "alpha": 0.8})


def test_counts_take_no_units():
    with pytest.raises(InputError, match="not a finite number"):
        parse("8KiB", quantity="count")


@pytest.mark.parametrize(
    "written, message",
    [
        ({"kind": "lognormal", "mean": "1KB", "median": "2KB"}, "field fileset.file_sizes: needs 0 < median <= mean"),
        ({"kind": "uniform", "low": 5, "high": 1}, "field fileset.file_sizes: low is above high"),
        ({"kind": "exponential", "meen": 5}, "field fileset.file_sizes.meen: unknown key 'meen'"),
        ({"kind": "pareto", "alpha": 1.5}, "field fileset.file_sizes: kind pareto needs 'scale'"),
        ({"kind": "gaussian"}, "field fileset.file_sizes.kind: kind must be one of"),
        ({"kind": "constant", "value": 1, "min": 9, "max": 2}, "field fileset.file_sizes: min is above max"),
    ],
)
def test_impossible_distributions_are_refused(written, message):
    with pytest.raises(InputError) as caught:
        parse(written)
    assert str(caught.value).startswith(message)


def test_histogram_file_with_comments_blank_lines_and_units(tmp_path):
    (tmp_path / "sizes.dist").write_text("# Fstress histogram\n\n1KiB:33\n  2KiB : 21   # trailing comment\n1MB:1\n")
    dist = parse({"kind": "histogram", "file": "sizes.dist", "max": "512KiB"}, base_dir=tmp_path)
    assert dist == {"kind": "histogram", "points": [[1024, 33], [2048, 21], [1_000_000, 1]], "max": 512 * 1024}


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("1KiB:3\n2KiB 4\n", 2, "expected 'value:weight', got '2KiB 4'"),
        ("# sizes\n1KiB:3\n\n2 lumps:4\n", 4, "'2 lumps' is not a size"),
        ("1KiB:3\n2KiB:lots\n", 2, "weight 'lots' is not a number"),
        ("1KiB:3\n2KiB:-1\n", 2, "weight -1 is negative"),
        ("1KiB:3\n8k:1\n", 2, "'8k' is ambiguous"),
    ],
)
def test_histogram_file_errors_name_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "sizes.dist"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        read_histogram_file(path, field="fileset.file_sizes", quantity="size")
    assert str(caught.value).startswith(f"{path}:{line}: field fileset.file_sizes: {message}")


def test_histogram_files_without_weight_are_refused(tmp_path):
    empty, zero = tmp_path / "empty.dist", tmp_path / "zero.dist"
    empty.write_text("# nothing here\n")
    zero.write_text("1KiB:0\n2KiB:0\n")
    for path, message in ((empty, "no value:weight lines"), (zero, "weights sum to zero")):
        with pytest.raises(InputError, match=message) as caught:
            read_histogram_file(path, field="fileset.file_sizes", quantity="size")
        assert str(caught.value).startswith(f"{path}: ")


def test_missing_histogram_file(tmp_path):
    with pytest.raises(InputError, match="cannot read histogram file") as caught:
        parse({"kind": "histogram", "file": "nope.dist"}, base_dir=tmp_path)
    assert str(caught.value).startswith(str(tmp_path / "nope.dist"))


def sampled_mean(draw, lo=None, hi=None, n=200_000):
    rng = random.Random(7)
    total = 0.0
    for _ in range(n):
        value = draw(rng)
        value = value if lo is None else max(lo, value)
        total += value if hi is None else min(hi, value)
    return total / n


def test_means_without_bounds():
    assert mean({"kind": "histogram", "points": [[5000, 3], [45000, 1]]}) == pytest.approx(15000)
    assert mean({"kind": "lognormal", "mean": 10500, "median": 1300}) == pytest.approx(10500)
    assert mean({"kind": "pareto", "alpha": 3, "scale": 2}) == pytest.approx(3)
    assert mean({"kind": "pareto", "alpha": 0.9, "scale": 2}) == float("inf")


@pytest.mark.parametrize(
    "dist, draw",
    [
        ({"kind": "pareto", "alpha": 1.5, "scale": 1600, "max": 1e6}, lambda r: 1600 / (1 - r.random()) ** (1 / 1.5)),
        (
            {"kind": "pareto", "alpha": 0.8, "scale": 1000, "min": 2000, "max": 1e5},
            lambda r: 1000 / (1 - r.random()) ** (1 / 0.8),
        ),
        ({"kind": "exponential", "mean": 5, "min": 1, "max": 8}, lambda r: r.expovariate(1 / 5)),
        ({"kind": "uniform", "low": 0, "high": 10, "min": 2, "max": 7}, lambda r: r.uniform(0, 10)),
        (
            {"kind": "lognormal", "mean": 10500, "median": 1300, "min": 1000, "max": 20000},
            lambda r: 1300 * 2.718281828459045 ** (r.gauss(0, 1) * 2.0441),
        ),
    ],
)
def test_bounded_means_match_sampling(dist, draw):
    # Self-scaling by bytes divides by this mean, so clamped tails must count exactly.
    assert mean(dist) == pytest.approx(sampled_mean(draw, dist.get("min"), dist.get("max")), rel=0.02)
