from pathlib import Path

import pytest
from peakbench.errors import InputError
from peakbench.mix import OPS
from peakbench.mixfile import RENAMED, SPEC_OPS, UNSUPPORTED, read_mixfile

GOOD = """SFS MIXFILE VERSION 2
# SPECsfs2008-like
getattr 26%
lookup 24%

read 18%
access 11%
write 10%
setattr 4%
readdirplus 2%
readlink 1%
readdir 1%
create 1%
remove 1%
root 1%
mknod 0%
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "test.mix"
    path.write_text(text)
    return path


def test_good_mixfile(tmp_path):
    mix = read_mixfile(write(tmp_path, GOOD))
    assert sum(mix.values()) == 100
    assert mix["getattr"] == 26 and mix["readlink"] == 1
    assert mix["null"] == 1  # root: an NFSv2 call that does nothing, i.e. a null round trip
    assert "mknod" not in mix  # 0% asks for nothing


def test_every_spec_op_maps_into_the_vocabulary_or_is_refused():
    for name in SPEC_OPS:
        assert RENAMED.get(name, name) in OPS or name in UNSUPPORTED


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("SFS MIXFILE VERSION 3\nread 100%\n", 1, "the first line must be exactly 'SFS MIXFILE VERSION 2'"),
        ("# SFS MIXFILE VERSION 2\nread 100%\n", 1, "the first line must be exactly"),
        ("SFS MIXFILE VERSION 2\nread 50%\nfrobnicate 50%\n", 3, "unknown op 'frobnicate'"),
        ("SFS MIXFILE VERSION 2\nread 50%\n# ok\nwrite 49%\n", 4, "the percentages total 99%, not 100%"),
        ("SFS MIXFILE VERSION 2\nread 1000%\n", 2, "expected 'opname NN%'"),
        ("SFS MIXFILE VERSION 2\nread 50\nwrite 50%\n", 2, "expected 'opname NN%'"),
        ("SFS MIXFILE VERSION 2\nread 50%\nread 50%\n", 3, "op 'read' is listed twice"),
        ("SFS MIXFILE VERSION 2\nread 90%\nmknod 10%\n", 3, "op 'mknod' at 10%: the engine cannot"),
        ("", 1, "the first line must be exactly"),
    ],
)
def test_bad_mixfiles_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        read_mixfile(path)
    assert str(caught.value).startswith(f"{path}:{line}: {message}")


BAD_WORKLOAD = """name = "uses-a-mixfile"
[fileset]
files_per_dir = 10
dirs_per_dir = 0
max_depth = 0
file_sizes = "4KiB"
[scaling]
files_per_op = 1
[mix]
mixfile = "test.mix"
"""


def test_a_bad_mixfile_fails_the_cli_with_status_2_and_writes_nothing(tmp_path, cli):
    write(tmp_path, "SFS MIXFILE VERSION 2\nread 50%\nfrobnicate 50%\n")
    workload = tmp_path / "w.toml"
    workload.write_text(BAD_WORKLOAD)
    target = tmp_path / "target"
    target.mkdir()
    done = cli("run", str(workload), "--target", str(target), "--rate", "10", "--db", str(tmp_path / "x.db"))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"peakbench: {tmp_path / 'test.mix'}:3: unknown op 'frobnicate'; SPECsfs ops are: "
        + " ".join(SPEC_OPS)
        + "\n"
    )
    assert list(target.iterdir()) == []
    assert not (tmp_path / "x.db").exists()
