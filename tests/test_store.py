import datetime
import sqlite3

import pytest
from peakbench.errors import InputError
from peakbench.store import SCHEMA_VERSION, Store, check_compatible

SPEC = {"schema": "peakbench.trial-spec/1", "load": {"rate": 250.0}, "fileset": {"files": 7}}
RESULT = {"requested_rate": 250.0, "achieved_rate": 249.5, "latency": {"mean_ms": 0.5}}


def test_trials_round_trip(tmp_path):
    path = tmp_path / "p.db"
    with Store(path) as store:
        done = store.add_trial(
            workload="mail",
            target="/mnt/x",
            spec=SPEC,
            sysinfo={"kernel": "6.1"},
            result=RESULT,
            notes=["mix sums to 101"],
        )
        failed = store.add_trial(workload="mail", target="/mnt/x", spec=SPEC, sysinfo={}, error="engine died")
    with Store(path) as store:  # a fresh connection sees what was committed
        trial = store.trial(done)
        assert trial["result"] == RESULT and trial["spec"] == SPEC
        assert trial["sysinfo"] == {"kernel": "6.1"} and trial["notes"] == ["mix sums to 101"]
        assert trial["status"] == "done" and trial["rate"] == 250.0
        created = datetime.datetime.fromisoformat(trial["created"])
        assert created.utcoffset() == datetime.timedelta(0)
        assert store.trial(failed)["status"] == "failed" and store.trial(failed)["result"] is None
        assert [t["id"] for t in store.trials()] == [done, failed]
        assert store.trial(99) is None


def test_the_store_uses_wal(tmp_path):
    Store(tmp_path / "p.db").close()
    assert sqlite3.connect(tmp_path / "p.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_from_a_newer_peakbench_is_refused(tmp_path):
    path = tmp_path / "p.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    expected = f"{path}: the store has schema version {SCHEMA_VERSION + 1}, newer than this peakbench understands"
    with pytest.raises(InputError) as caught:
        Store(path)
    assert str(caught.value).startswith(expected)
    with pytest.raises(InputError):
        check_compatible(path)


def test_checking_a_store_creates_nothing(tmp_path):
    check_compatible(tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


def test_a_file_that_is_not_a_store(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite " * 100)
    with pytest.raises(InputError, match="not a peakbench store"):
        check_compatible(path)


def test_results_commands_refuse_a_newer_store(tmp_path, cli):
    path = tmp_path / "p.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schema_version SET version = 99")
    done = cli("results", "list", "--db", str(path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "schema version 99" in done.stderr


def test_results_list_shows_every_kind_of_job_and_filters_by_kind(tmp_path):
    """Searches, sfs runs, replay sweeps, surfaces and plans are listed with their kind, id, workload,
    target and state, not only loose trials; --kind keeps the kinds asked for."""
    import json

    from peakbench.cli import main

    path = tmp_path / "p.db"
    with Store(path) as store:
        store.add_search(workload="mail", target="null://", policy="guided", settings={})
        store.add_sfs_run(workload="specsfs2008", target="/srv/a", settings={})
        store.add_replay_sweep(workload="replay:access.log", target="http://h/", specs=[], prepare=False)
        store.add_surface(plan={"workload": "mail", "target": "null://"})
        store.add_plan(name="rates", path="plan.toml", sources={}, plan={}, workdir=".", tests=[], notes=[])
    assert main(["results", "list", "--db", str(path), "--json", str(tmp_path / "all.json")]) == 0
    listed = {job["kind"]: job for job in json.loads((tmp_path / "all.json").read_text())}
    assert sorted(listed) == ["plan", "replay", "search", "sfs", "surface"]
    assert (listed["sfs"]["id"], listed["sfs"]["workload"], listed["sfs"]["target"]) == (1, "specsfs2008", "/srv/a")
    assert listed["plan"]["workload"] == "rates" and all(job["status"] for job in listed.values())
    chosen = tmp_path / "chosen.json"
    assert main(["results", "list", "--kind", "sfs", "--kind", "plan", "--db", str(path), "--json", str(chosen)]) == 0
    assert sorted(job["kind"] for job in json.loads(chosen.read_text())) == ["plan", "sfs"]
