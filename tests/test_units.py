import pytest
from peakbench.errors import InputError
from peakbench.units import format_size, parse_duration, parse_rate, parse_size


@pytest.mark.parametrize(
    "written, size",
    [
        (4096, 4096),
        ("4096", 4096),
        ("512B", 512),
        ("8KiB", 8192),
        ("8kib", 8192),
        ("1.5MB", 1_500_000),
        ("1 kb", 1000),
        ("120MB", 120_000_000),
        ("2GiB", 2 * 1024**3),
        ("1e3", 1000),
    ],
)
def test_sizes_decimal_and_binary_units(written, size):
    assert parse_size(written) == size


def test_bare_k_is_refused_because_tools_disagree_on_it():
    with pytest.raises(InputError) as caught:
        parse_size("8k", "read.size")
    assert str(caught.value) == (
        "field read.size: '8k' is ambiguous: write 8KB (powers of 1000) or 8KiB (powers of 1024)"
    )


@pytest.mark.parametrize("bad", ["8 potatoes", "KB", "-5", -1, True, "", [8]])
def test_bad_sizes_name_the_field(bad):
    with pytest.raises(InputError) as caught:
        parse_size(bad, "fileset.file_sizes")
    assert str(caught.value).startswith("field fileset.file_sizes: ")


def test_durations():
    assert parse_duration(30) == 30
    assert parse_duration("30s") == 30
    assert parse_duration("2m") == 120
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1h") == 3600
    with pytest.raises(InputError):
        parse_duration("soon")


def test_sizes_print_in_the_units_they_were_written_in():
    assert format_size(8192) == "8 KiB"
    assert format_size(10_500) == "10.5 KB"
    assert format_size(138_000_000) == "138 MB"
    assert format_size(25_276_502_016) == "23.5 GiB"
    assert format_size(100) == "100 B"


@pytest.mark.parametrize(
    "written, rate", [("2k", 2000.0), ("1.5M", 1.5e6), ("250", 250.0), ("0.5k", 500.0), (40, 40.0)]
)
def test_rates_take_k_and_m_suffixes(written, rate):
    assert parse_rate(written, "--rate") == rate


@pytest.mark.parametrize("bad", ["2x", "2kB", "0", "-1k", "nan", "inf", "51M", True])
def test_bad_rates_name_the_field(bad):
    with pytest.raises(InputError) as refused:
        parse_rate(bad, "--rate")
    assert str(refused.value).startswith("field --rate: ")
