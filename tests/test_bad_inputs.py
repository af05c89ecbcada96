"""The bad-input corpus (tests/bad-inputs/cases.toml): every case is refused with exit 2 and the one line
recorded for it, naming the file and line (and the field, where the file has fields), with nothing written:
no store, nothing in the target, no file beside the inputs."""

import contextlib
import io
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from peakbench import cli

CORPUS = Path(__file__).parent / "bad-inputs"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]


@pytest.mark.parametrize("case", CASES, ids=[case["input"] for case in CASES])
def test_a_bad_input_is_refused_with_one_line_naming_its_place(case, tmp_path):
    # "file:line: " and then "field NAME: " unless the file is a mixfile or not TOML at all.
    assert re.match(r"peakbench: \{dir\}/[^:]+:\d+: (field \S+: |invalid TOML: |the )", case["error"]), case["error"]
    for item in CORPUS.iterdir():
        shutil.copy(item, tmp_path)
    (tmp_path / "target").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main([arg.replace("{dir}", str(tmp_path)) for arg in case["command"]])
    assert (code, stderr.getvalue()) == (2, case["error"].replace("{dir}", str(tmp_path)) + "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "target").iterdir()) == []
