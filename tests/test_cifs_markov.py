"""The specsfs2008-cifs workload: SPEC's CIFS op mix from a Markov model over handle states,
whose stream only opens, uses and closes handles in valid order; its model file's errors; and
the targets that have no handles refusing it before a trial."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from peakbench.engine import Engine
from peakbench.errors import InputError
from peakbench.workload import CANNED_DIR, find_workload, trial_spec

# SPECsfs2008 User's Guide, section 3.3, in peakbench's ops (workloads/markov/specsfs2008-cifs.toml).
SPEC_CIFS = {
    "null": 0.5,  # ECHO
    "lock": 1.1,  # LOCKING_ANDX
    "getsecurity": 1.6,  # NT_TRANSACT_QUERY_SECURITY_DESC
    "read": 20.5,  # READ_ANDX
    "fsinfo": 1.6,  # TRANS2_QUERY_FS_INFORMATION
    "fgetattr": 12.9,  # TRANS2_QUERY_FILE_INFORMATION
    "getattr": 21.5,  # TRANS2_QUERY_PATH_INFORMATION
    "fsetattr": 3.2,  # TRANS2_SET_FILE_INFORMATION
    "readdir": 8.6,  # TRANS2_FIND_FIRST2
    "write": 8.6,  # WRITE_ANDX
    "open": 9.7,  # NT_CREATE_ANDX
    "close": 9.7,  # CLOSE
    "commit": 0.5,  # FLUSH
}


def generate(engine_path: Path, workload, n: int, tmp_path: Path) -> dict:
    """`peakbench-engine generate`'s count of the first `n` ops of the workload's stream."""
    spec = trial_spec(workload, {"kind": "null"}, rate=100, warmup_s=0, runtime_s=1)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [str(engine_path), "generate", str(tmp_path / "spec.json"), str(n)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.integration
def test_a_million_generated_ops_reproduce_specs_cifs_mix_in_valid_handle_sequences(engine_path, tmp_path):
    out = generate(engine_path, find_workload("specsfs2008-cifs"), 1_000_000, tmp_path)
    assert out["requests"] == 1_000_000 and sum(out["ops"].values()) == 1_000_000
    for op, percent in SPEC_CIFS.items():
        assert out["ops"][op] / 1e4 == pytest.approx(percent, abs=0.5), (op, out["ops"])
    assert set(out["ops"]) == set(SPEC_CIFS)
    # Every open was of a file not open, every op on a handle and every close on an open one,
    # and a client never held more than the model's 4 handles (and did reach them).
    assert out["invalid"] == 0 and out["most_open"] == 4, out


def test_the_cifs_file_set_is_the_nfs_workloads_less_its_symlinks():
    nfs, cifs = find_workload("specsfs2008"), find_workload("specsfs2008-cifs")
    assert {**nfs.fileset, "symlinks_per_dir": cifs.fileset["symlinks_per_dir"]} == cifs.fileset
    assert (nfs.scaling, nfs.read, nfs.write) == (cifs.scaling, cifs.read, cifs.write)
    assert cifs.fileset["symlinks_per_dir"] == {"kind": "constant", "value": 0}


@pytest.mark.parametrize("kind", ["posix", "nfs", "http"])
def test_targets_without_handles_refuse_the_cifs_workload_before_a_trial(kind):
    target = {"kind": kind, "path": "/nonexistent", "host": "h", "export": "/x", "url": "http://h/"}
    with pytest.raises(InputError) as raised:
        trial_spec(find_workload("specsfs2008-cifs"), target, rate=100, warmup_s=0, runtime_s=1)
    assert f"{kind}:// targets cannot do" in str(raised.value) and "open" in str(raised.value)


MODEL = (CANNED_DIR / "markov" / "specsfs2008-cifs.toml").read_text()


@pytest.mark.parametrize(
    "old, new, line_of, message",
    [
        (
            '{op = "read", weight = 25.6250, to = "one"}',
            '{op = "reed", weight = 1, to = "one"}',
            "reed",
            "unknown op 'reed'",
        ),
        (
            '{op = "open", weight = 12.1250, to = "one"}',
            '{op = "read", weight = 1, to = "none"}',
            '"read", weight = 1, to = "none"',
            "read needs an open handle, and state 'none' holds none",
        ),
        (
            '{op = "close", weight = 12.1250, to = "none"}',
            '{op = "close", weight = 1, to = "one"}',
            '"close", weight = 1, to = "one"',
            "close from 'one' (1 handles) leaves 0, but 'one' holds 1",
        ),
        (
            '{op = "write", weight = 10.7500, to = "two"}',
            '{op = "write", weight = -1, to = "two"}',
            "weight = -1",
            "must be a number >= 0",
        ),
        (
            '{op = "lock", weight = 1.3750, to = "three"}',
            '{op = "lock", weight = 1, to = "five"}',
            "five",
            "must name a state",
        ),
        (
            '{op = "null", weight = 0.4251, to = "four"}',
            '{op = "remove", weight = 1, to = "four"}',
            "remove",
            "remove would take a file from under",
        ),
        ('start = "none"', 'start = "one"', 'start = "one"', "state 'one' holds handles; a client starts with none"),
        (
            '{op = "open", weight = 12.1250, to = "four"}',
            '{op = "open", weight = 0, to = "four"}',
            "[states.four]",
            "no transition from the start reaches state 'four'",
        ),
    ],
)
def test_a_bad_markov_model_is_one_line_naming_its_file_line_and_field(tmp_path, old, new, line_of, message):
    assert old in MODEL
    model = tmp_path / "markov" / "m.toml"
    model.parent.mkdir()
    model.write_text(MODEL.replace(old, new, 1))
    workload = (
        (CANNED_DIR / "specsfs2008-cifs.toml").read_text().replace("markov/specsfs2008-cifs.toml", "markov/m.toml")
    )
    (tmp_path / "w.toml").write_text(workload)
    for dist in ("sfs2008-file-sizes.dist", "sfs2008-io-sizes.dist"):
        (tmp_path / dist).write_text((CANNED_DIR / dist).read_text())
    with pytest.raises(InputError) as raised:
        find_workload(str(tmp_path / "w.toml"))
    error = raised.value
    line = next(i for i, text in enumerate(model.read_text().splitlines(), 1) if line_of in text)
    assert (Path(error.file), error.line) == (model, line), str(error)
    assert message in str(error) and "\n" not in str(error) and error.field.startswith(("states.", "start"))


@pytest.mark.integration
def test_the_engine_refuses_handle_ops_outside_a_markov_workload(engine_path):
    spec = trial_spec(find_workload("specsfs2008-cifs"), {"kind": "null"}, rate=100, warmup_s=0, runtime_s=1)
    del spec["markov"]
    with pytest.raises(InputError) as raised:
        Engine(engine_path).validate(spec)
    assert "handle ops come only from a Markov workload" in str(raised.value)
