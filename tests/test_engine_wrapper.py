"""How peakbench talks to the engine binary, checked against small stand-in engines."""

import sys
import time

import pytest
from peakbench.engine import Engine, find_engine
from peakbench.errors import InputError, RunError

SPEC = {
    "target": {"kind": "null"},
    "load": {"rate": 10, "warmup_s": 0, "runtime_s": 1},
    "fileset": {"files": 1, "file_sizes": {"kind": "constant", "value": 4096}},
}


def fake_engine(tmp_path, body: str):
    path = tmp_path / "fake-engine"
    path.write_text(f"#!{sys.executable}\nimport json, sys, time\nspec = json.load(sys.stdin)\n{body}\n")
    path.chmod(0o755)
    return Engine(path)


@pytest.mark.integration
def test_progress_lines_go_to_the_callback_and_the_result_comes_back(tmp_path):
    engine = fake_engine(
        tmp_path,
        """
for second in (1, 2):
    print(json.dumps({"phase": "measure", "elapsed_s": second, "sent": second * 10}), file=sys.stderr, flush=True)
print(json.dumps({"requested_rate": spec["load"]["rate"], "achieved_rate": 9.9}))
""",
    )
    events = []
    assert engine.run(SPEC, events.append) == {"requested_rate": 10, "achieved_rate": 9.9}
    assert [event["sent"] for event in events] == [10, 20]


@pytest.mark.integration
def test_exit_2_is_an_input_error_with_the_engines_message(tmp_path):
    engine = fake_engine(
        tmp_path,
        """
print("<stdin>: field load.rate: must be > 0", file=sys.stderr)
sys.exit(2)
""",
    )
    with pytest.raises(InputError, match="field load.rate: must be > 0"):
        engine.validate(SPEC)


@pytest.mark.integration
def test_exit_1_is_a_run_error_and_keeps_the_text_between_progress_lines(tmp_path):
    engine = fake_engine(
        tmp_path,
        """
print(json.dumps({"phase": "prepare", "done": 1, "total": 2}), file=sys.stderr)
print("refusing to prepare in /x: it is not empty", file=sys.stderr)
sys.exit(1)
""",
    )
    with pytest.raises(RunError, match="engine prepare failed \\(exit status 1\\): refusing to prepare in /x"):
        engine.prepare(SPEC)


@pytest.mark.integration
def test_a_hung_engine_is_stopped_at_the_deadline(tmp_path):
    engine = fake_engine(tmp_path, "time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(RunError, match="did not finish within 1 s"):
        engine._call("run", SPEC, timeout_s=1, on_progress=None)
    assert time.monotonic() - started < 10


@pytest.mark.integration
def test_a_result_that_is_not_json_is_an_error(tmp_path):
    engine = fake_engine(tmp_path, "print('done!')")
    with pytest.raises(RunError, match="printed no JSON result"):
        engine.run(SPEC)


def test_the_environment_variable_chooses_the_engine(tmp_path, monkeypatch):
    engine = fake_engine(tmp_path, "")
    monkeypatch.setenv("PEAKBENCH_ENGINE", str(engine.path))
    assert find_engine() == engine.path
    monkeypatch.setenv("PEAKBENCH_ENGINE", str(tmp_path / "missing"))
    with pytest.raises(RunError, match="is not an executable file"):
        find_engine()
