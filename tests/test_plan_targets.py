"""Plans against real servers: trial tests on nfs-ganesha (nfs://) and nginx (http://, its file set
built in the docroot it serves) in one plan file, a trial test on Samba's smbd (smb://), and a
replay step run end to end against nginx."""

import json

import pytest
from peakbench import tracegen
from samba import Samba
from test_harness_run import query, runs_of, write

RATE = 100


def test_a_plan_runs_trials_against_nfs_and_http_servers(engine_path, ganesha_server, nfs_url, nginx, cli, tmp_path):
    docroot = tmp_path / "www"
    docroot.mkdir()
    server = nginx(docroot)  # GET and HEAD only: the file set is written into the docroot
    plan = write(
        tmp_path / "servers.toml",
        f"""
        name = "servers"
        [defaults]
        rate = {RATE}
        warmup = 0
        runtime = "1s"
        stop = {{min_runs = 1}}

        [[test]]
        name = "nfs"
        workload = "mail"
        target = "{nfs_url}"

        [[test]]
        name = "http"
        workload = "web-server"
        target = "{server.url}"
        docroot = "{docroot}"
        """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    for name, url in (("nfs", nfs_url), ("http", server.url)):
        (run,) = runs_of(db, name)
        assert run["status"] == "done", run
        assert run["metrics"]["errors"] == 0 and run["metrics"]["achieved_rate"] > 0.8 * RATE, (name, run["metrics"])
        (trial,) = [query(db, "SELECT * FROM trials WHERE id = ?", i)[0] for i in json.loads(run["trial_ids"])]
        assert trial["target"] == url and json.loads(trial["result"])["completed"] == run["metrics"]["completed"]
    # The servers saw the requests: nginx logged the reads, ganesha's export holds the file set.
    assert sum(1 for method, *_ in server.access_log_entries() if method == "GET") > 0
    assert any((ganesha_server.export_dir / nfs_url.rsplit("/", 1)[1]).iterdir())


def test_a_plan_runs_trials_against_an_smb_server(engine_path, cli, tmp_path):
    with Samba() as server:
        plan = write(
            tmp_path / "smb.toml",
            f"""
            [[test]]
            name = "smb"
            workload = "web-server"
            target = "{server.url("plan")}"
            rate = {RATE}
            warmup = 0
            runtime = "1s"
            stop = {{min_runs = 1}}
            """,
        )
        before = server.smb2_counts()
        db = tmp_path / "s.db"
        done = cli("plan", "run", str(plan), "--db", str(db))
        assert done.returncode == 0, done.stderr
        seen = {name: count - before[name] for name, count in server.smb2_counts().items()}
    (run,) = runs_of(db, "smb")
    assert run["status"] == "done", run
    assert run["metrics"]["errors"] == 0 and run["metrics"]["achieved_rate"] > 0.8 * RATE, run["metrics"]
    # smbd answered at least every request of the measured window (and the set-up's besides).
    assert seen["create"] + seen["getinfo"] + seen["read"] + seen["find"] >= run["metrics"]["completed"], seen


def test_a_plan_refuses_several_clients_on_one_server_directory(cli, tmp_path):
    plan = write(
        tmp_path / "two.toml",
        """
        [[test]]
        name = "nfs"
        workload = "mail"
        target = "nfs://127.0.0.1/export"
        rate = 100
        clients = 2
        """,
    )
    done = cli("plan", "run", str(plan), "--db", str(tmp_path / "s.db"))
    assert done.returncode == 2
    assert f"{plan}:" in done.stderr and "clients" in done.stderr and "one client per trial" in done.stderr


def test_a_replay_step_replays_a_log_against_nginx_at_each_rate(engine_path, nginx, cli, tmp_path):
    log = tracegen.write(tmp_path / "access.log.gz", tracegen.TraceShape(requests=500, files=50, seed=3))
    docroot = tmp_path / "www"
    assert cli("replay", "--build-docroot", str(docroot), str(log)).returncode == 0
    server = nginx(docroot)
    plan = write(
        tmp_path / "replay.toml",
        f"""
        name = "replays"
        [[test]]
        name = "replay-{{rate}}"
        kind = "replay"
        loop = {{rate = [100, 200]}}
        log = "access.log.gz"
        target = "{server.url}"
        args = ["--rate", "{{rate}}", "--warmup", "0", "--runtime", "1"]
        metric = "achieved_rate"
        """,
    )
    db = tmp_path / "s.db"
    done = cli("plan", "run", str(plan), "--db", str(db))
    assert done.returncode == 0, done.stderr
    sent = 0
    for rate in (100, 200):
        (run,) = runs_of(db, f"replay-{rate}")
        assert run["status"] == "done", run
        assert run["metrics"]["achieved_rate"] == pytest.approx(rate, rel=0.1), run["metrics"]
        assert run["metrics"]["output_mbit_s"] > 0
        sent += run["metrics"]["sent"]
    # Every request the two replays sent reached nginx, and the store holds both as replay trials.
    assert sent == 300 and len([e for e in server.access_log_entries() if e[0] != "OPTIONS"]) == sent
    workloads = [row["workload"] for row in query(db, "SELECT workload FROM trials ORDER BY id")]
    assert workloads == ["replay:access.log.gz"] * 2
