"""The results store: one SQLite file (default ./peakbench.db) holding every trial.

Each trial is one row with its spec, raw engine result and system snapshot as
JSON, committed in a single transaction, so a crash never leaves half a trial.
The schema is versioned: MIGRATIONS[n] takes a store from version n to n+1,
so later features (searches, plans) add a step instead of breaking old files,
and a store written by a newer peakbench is refused rather than misread.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3
from pathlib import Path

from .contract import TrialResult
from .credentials import without_passwords
from .errors import InputError

DEFAULT_PATH = Path("peakbench.db")

MIGRATIONS = [
    [  # version 1: trials
        """CREATE TABLE trials (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            workload TEXT NOT NULL,
            target TEXT NOT NULL,             -- as the user named it
            rate REAL NOT NULL,               -- requested ops/s
            status TEXT NOT NULL,             -- 'done' or 'failed'
            error TEXT,                       -- why a failed trial failed
            notes TEXT NOT NULL DEFAULT '[]', -- JSON list, e.g. the mix normalisation
            spec TEXT NOT NULL,               -- JSON TrialSpec sent to the engine
            result TEXT,                      -- JSON TrialResult, NULL if failed
            sysinfo TEXT NOT NULL             -- JSON system snapshot
        )""",
        "CREATE INDEX trials_by_workload ON trials (workload, created)",
    ],
    [  # version 2: peak-rate searches; their trials point at them
        """CREATE TABLE searches (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            workload TEXT NOT NULL,
            target TEXT NOT NULL,
            policy TEXT NOT NULL,
            settings TEXT NOT NULL,           -- JSON SearchSettings
            status TEXT NOT NULL,             -- 'running', 'done' or 'failed'
            error TEXT,
            result TEXT                       -- JSON SearchResult, NULL until done
        )""",
        "ALTER TABLE trials ADD COLUMN search_id INTEGER REFERENCES searches (id)",
    ],
    [  # version 3: response surfaces; the search of each sample points at its surface
        """CREATE TABLE surfaces (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            plan TEXT NOT NULL,               -- JSON: the plan as loaded (factors, samples, target template)
            status TEXT NOT NULL,             -- 'running', 'done' or 'failed'
            error TEXT,
            result TEXT                       -- JSON SurfaceResult, NULL until done
        )""",
        "ALTER TABLE searches ADD COLUMN surface_id INTEGER REFERENCES surfaces (id)",
        "ALTER TABLE searches ADD COLUMN sample TEXT",  # JSON factor values of the sample
    ],
    [  # version 4: experiment plans (harness/): the plan, its expanded tests, every run, events
        """CREATE TABLE plans (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            name TEXT NOT NULL,
            path TEXT NOT NULL,               -- the plan file as given
            sources TEXT NOT NULL,            -- JSON {file: text} of the plan and its includes
            plan TEXT NOT NULL,               -- JSON of the validated, expanded plan (resume reads this)
            workdir TEXT NOT NULL,            -- outputs, images and mount points of this plan
            status TEXT NOT NULL,             -- 'running', 'done', 'failed' (fast-fail) or 'stopped'
            error TEXT,
            finished TEXT
        )""",
        """CREATE TABLE plan_tests (
            id INTEGER PRIMARY KEY,
            plan_id INTEGER NOT NULL REFERENCES plans (id),
            seq INTEGER NOT NULL,             -- run order within the plan
            name TEXT NOT NULL,               -- unique within the plan, after expansion
            kind TEXT NOT NULL,               -- 'command' or 'trial'
            vars TEXT NOT NULL,               -- JSON: the variables this instance ran with
            settings TEXT NOT NULL,           -- JSON: the whole expanded test instance
            status TEXT NOT NULL,             -- 'pending', 'running', 'done', 'failed'
            stop_reason TEXT,                 -- why it stopped: the rule that held, max_runs, a failure
            sysinfo TEXT,                     -- JSON system snapshot taken when the test (re)started
            UNIQUE (plan_id, seq), UNIQUE (plan_id, name)
        )""",
        """CREATE TABLE plan_runs (
            id INTEGER PRIMARY KEY,
            plan_id INTEGER NOT NULL REFERENCES plans (id),
            test_id INTEGER NOT NULL REFERENCES plan_tests (id),
            attempt INTEGER NOT NULL,         -- 1, 2, ... every stored run of the test, in order
            created TEXT NOT NULL,
            status TEXT NOT NULL,             -- 'done' or 'failed'
            discarded INTEGER NOT NULL,       -- 1: a warm-up run (cache = warm), not counted
            metrics TEXT NOT NULL,            -- JSON {name: number}: elapsed user system cpu exit_status,
                                              --   parsed metrics, trial metrics, mon_* monitor metrics
            threads TEXT NOT NULL,            -- JSON list: each thread's/client's own figures and output
            hooks TEXT NOT NULL,              -- JSON list: setup/cleanup hooks of this run, with output
            cache TEXT NOT NULL,              -- JSON list: what the cache policy did before the run
            monitor TEXT,                     -- JSON {summary, series} sampled during the run
            sysinfo TEXT NOT NULL,            -- JSON system snapshot
            result TEXT,                      -- older plans' merged TrialResult; now the trial's own
            trial_ids TEXT,                   -- JSON list of trials.id rows: the run's trial (older plans: one per client)
            error TEXT,
            UNIQUE (test_id, attempt)
        )""",
        """CREATE TABLE plan_events (
            id INTEGER PRIMARY KEY,
            plan_id INTEGER NOT NULL REFERENCES plans (id),
            test_id INTEGER REFERENCES plan_tests (id),
            created TEXT NOT NULL,
            kind TEXT NOT NULL,               -- 'hook', 'warning', 'failure', 'notify', 'resume', 'note'
            message TEXT NOT NULL,
            detail TEXT                       -- JSON
        )""",
        "CREATE INDEX plan_runs_by_test ON plan_runs (test_id, attempt)",
        "CREATE INDEX plan_events_by_plan ON plan_events (plan_id, id)",
    ],
    [  # version 5: SPECsfs-style load-point curves (`peakbench sfs`); their trials point at them
        """CREATE TABLE sfs_runs (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            workload TEXT NOT NULL,
            target TEXT NOT NULL,
            settings TEXT NOT NULL,           -- JSON: the rc file's values and the load points
            status TEXT NOT NULL,             -- 'running', 'done' or 'failed'
            error TEXT
        )""",
        "ALTER TABLE trials ADD COLUMN sfs_run_id INTEGER REFERENCES sfs_runs (id)",
    ],
    # version 6: what a job was started with, so that `peakbench resume` can finish it; what a trial cost.
    # From here on a trial's status may also be 'interrupted': its result covers the part of its window
    # measured before Ctrl-C.
    [
        "ALTER TABLE searches ADD COLUMN invocation TEXT",  # JSON: workload, target, seed, scale, clients, ...
        "ALTER TABLE sfs_runs ADD COLUMN invocation TEXT",  # JSON: clients, cluster
        "ALTER TABLE trials ADD COLUMN cost_s REAL",  # wall seconds: prepare, warm-up, run, write-back
    ],
    [  # version 7: replay sweeps (`peakbench replay --dataset-size A --dataset-size B ...`), so they resume
        """CREATE TABLE replay_sweeps (
            id INTEGER PRIMARY KEY,
            created TEXT NOT NULL,            -- UTC, ISO 8601
            workload TEXT NOT NULL,           -- replay:LOGNAME
            target TEXT NOT NULL,
            settings TEXT NOT NULL,           -- JSON {specs: [TrialSpec, ...] in sweep order, prepare: bool}
            status TEXT NOT NULL,             -- 'running', 'done' or 'failed'
            error TEXT
        )""",
        "ALTER TABLE trials ADD COLUMN replay_sweep_id INTEGER REFERENCES replay_sweeps (id)",
        "ALTER TABLE surfaces ADD COLUMN invocation TEXT",  # JSON {scale, seed}: what a resume needs
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
JOB_KINDS = ("trial", "search", "sfs", "replay", "surface", "plan")  # what `results list` shows
JSON_COLUMNS = (
    "notes",
    "spec",
    "result",
    "sysinfo",
    "settings",
    "plan",
    "sample",
    "sources",
    "vars",
    "metrics",
    "threads",
    "hooks",
    "cache",
    "monitor",
    "trial_ids",
    "detail",
    "invocation",
)


def check_compatible(path: Path) -> None:
    """Refuse, before a trial runs, a store this version cannot write into.

    Does not create the file: bad input must leave nothing behind.
    """
    if not Path(path).exists():
        return
    try:
        connection = sqlite3.connect(f"file:{Path(path).absolute()}?mode=ro", uri=True)
        try:
            _check_version(connection, path)
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise InputError(f"not a peakbench store: {error}", file=path) from None


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection. A WAL store in a directory this user cannot write has no -shm file to
    share, so it is then read as immutable (fine for an archived store; a live writer's newest
    transactions may not show)."""
    if not path.is_file():
        raise InputError("no such store (run a trial first, or give --db)", file=path)
    uri = f"file:{path.absolute()}"
    try:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return connection
    except sqlite3.OperationalError:
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)


def _read_version(connection: sqlite3.Connection) -> int:
    has_table = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if not has_table:
        return 0
    return connection.execute("SELECT version FROM schema_version").fetchone()[0]


def _check_version(connection: sqlite3.Connection, path: Path) -> int:
    version = _read_version(connection)
    if version > SCHEMA_VERSION:
        raise InputError(
            f"the store has schema version {version}, newer than this peakbench understands"
            f" ({SCHEMA_VERSION}); upgrade peakbench or use another --db",
            file=path,
        )
    return version


class Store:
    """The store, opened for writing (created and migrated as needed) or, with readonly, for reading only:
    readers never write, so an archived or shared store that this user cannot write is still readable."""

    def __init__(self, path: Path = DEFAULT_PATH, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        try:
            if readonly:
                self.connection = _connect_readonly(self.path)
                self.connection.row_factory = sqlite3.Row
                version = _check_version(self.connection, self.path)
                if version < SCHEMA_VERSION:
                    raise InputError(
                        f"the store has schema version {version}, older than this peakbench's"
                        f" ({SCHEMA_VERSION}), and is opened read-only: run any writing command on"
                        " it once (or on a writable copy) to upgrade it",
                        file=self.path,
                    )
                return
            # Autocommit mode: transactions are opened explicitly, so that schema
            # changes (which sqlite3 would otherwise commit one by one) are atomic too.
            self.connection = sqlite3.connect(self.path, isolation_level=None)
            self.connection.row_factory = sqlite3.Row
            self.connection.execute("PRAGMA journal_mode = WAL")
            self._migrate()  # takes the write lock, so a store this user cannot write is refused here
        except sqlite3.OperationalError as error:
            raise InputError(f"cannot {'read' if readonly else 'write'} the store: {error}", file=self.path) from None
        except sqlite3.DatabaseError as error:
            raise InputError(f"not a peakbench store: {error}", file=self.path) from None

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @contextlib.contextmanager
    def _transaction(self):
        # IMMEDIATE takes the write lock at once, so two peakbench processes
        # cannot both decide to migrate the same store.
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def _migrate(self) -> None:
        with self._transaction():
            version = _check_version(self.connection, self.path)
            if version == SCHEMA_VERSION:
                return
            if version == 0:
                self.connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                self.connection.execute("INSERT INTO schema_version VALUES (0)")
            for step in MIGRATIONS[version:]:
                for statement in step:
                    self.connection.execute(statement)
            self.connection.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    def add_trial(self, **trial) -> int:
        """Store one trial (insert_trial's fields) in a transaction of its own: the whole trial or nothing.
        It is done if it has a result, failed otherwise, interrupted if its result covers only part of its
        window; returns its id."""
        with self._transaction():
            return self.insert_trial(**trial)

    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any exception): for writes that must land together."""
        return self._transaction()

    def insert_trial(
        self,
        *,
        workload: str,
        target: str,
        spec: dict,
        sysinfo: dict,
        result: dict | None = None,
        error: str | None = None,
        notes: list[str] = (),
        search_id: int | None = None,
        sfs_run_id: int | None = None,
        replay_sweep_id: int | None = None,
        cost_s: float | None = None,
        interrupted: bool = False,
    ) -> int:
        """add_trial's INSERT, inside a transaction the caller holds (see transaction())."""
        cursor = self.connection.execute(
            "INSERT INTO trials (created, workload, target, rate, status, error, notes, spec, result, sysinfo,"
            " search_id, sfs_run_id, replay_sweep_id, cost_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _now(),
                workload,
                without_passwords(target),
                spec["load"]["rate"],
                "interrupted" if interrupted else "done" if result is not None else "failed",
                error,
                _encode(list(notes)),
                _encode(spec),
                _encode(result) if result is not None else None,
                _encode(sysinfo),
                search_id,
                sfs_run_id,
                replay_sweep_id,
                cost_s,
            ),
        )
        return cursor.lastrowid

    def add_search(
        self,
        *,
        workload: str,
        target: str,
        policy: str,
        settings: dict,
        surface_id: int | None = None,
        sample: dict | None = None,
        invocation: dict | None = None,
    ) -> int:
        """Open a search before its first trial, so every trial can point at it; returns its id.
        `invocation`: what `peakbench resume` needs to continue it (None: it cannot be resumed)."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO searches (created, workload, target, policy, settings, status, surface_id, sample,"
                " invocation) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                (
                    _now(),
                    workload,
                    without_passwords(target),
                    policy,
                    _encode(settings),
                    surface_id,
                    _encode(sample) if sample is not None else None,
                    _encode(invocation) if invocation is not None else None,
                ),
            )
        return cursor.lastrowid

    def reopen(self, kind: str, job_id: int) -> None:
        """Mark an unfinished search, sfs run, replay sweep or surface as running again (`peakbench resume`)."""
        table = {"search": "searches", "sfs": "sfs_runs", "replay": "replay_sweeps", "surface": "surfaces"}[kind]
        with self._transaction():
            self.connection.execute(f"UPDATE {table} SET status = 'running', error = NULL WHERE id = ?", (job_id,))

    def finish_search(self, search_id: int, *, result: dict | None = None, error: str | None = None) -> None:
        self._finish("searches", search_id, result, error)

    def add_surface(self, *, plan: dict, invocation: dict | None = None) -> int:
        """Open a surface before its first sample, so every sample's search can point at it."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO surfaces (created, plan, status, invocation) VALUES (?, ?, 'running', ?)",
                (_now(), _encode(plan), _encode(invocation) if invocation is not None else None),
            )
        return cursor.lastrowid

    def finish_surface(self, surface_id: int, *, result: dict | None = None, error: str | None = None) -> None:
        self._finish("surfaces", surface_id, result, error)

    def surfaces(self) -> list[dict]:
        return self._rows("SELECT * FROM surfaces ORDER BY id")

    def surface_searches(self, surface_id: int) -> list[dict]:
        return self._rows("SELECT * FROM searches WHERE surface_id = ? ORDER BY id", surface_id)

    def surface(self, surface_id: int) -> dict | None:
        return self._row("surfaces", surface_id)

    def _counts(self, sql: str) -> dict[int, int]:
        """{id: count} from a `SELECT id, count(*) ... GROUP BY 1`: one query for every job's count."""
        return dict(self.connection.execute(sql).fetchall())

    def _rows(self, sql: str, *args) -> list[dict]:
        return [_decode(row) for row in self.connection.execute(sql, args)]

    def _row(self, table: str, row_id: int) -> dict | None:
        rows = self._rows(f"SELECT * FROM {table} WHERE id = ?", row_id)
        return rows[0] if rows else None

    def _finish(self, table: str, row_id: int, result: dict | None, error: str | None) -> None:
        with self._transaction():
            self.connection.execute(
                f"UPDATE {table} SET status = ?, result = ?, error = ? WHERE id = ?",
                (
                    "done" if result is not None else "failed",
                    _encode(result) if result is not None else None,
                    error,
                    row_id,
                ),
            )

    def searches(self) -> list[dict]:
        return self._rows("SELECT * FROM searches ORDER BY id")

    def search(self, search_id: int) -> dict | None:
        return self._row("searches", search_id)

    def search_trials(self, search_id: int) -> list[dict]:
        return self._rows("SELECT * FROM trials WHERE search_id = ? ORDER BY id", search_id)

    def add_sfs_run(self, *, workload: str, target: str, settings: dict, invocation: dict | None = None) -> int:
        """Open a load-point curve before its first trial; returns its id."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO sfs_runs (created, workload, target, settings, status, invocation)"
                " VALUES (?, ?, ?, ?, 'running', ?)",
                (
                    _now(),
                    workload,
                    without_passwords(target),
                    _encode(settings),
                    _encode(invocation) if invocation is not None else None,
                ),
            )
        return cursor.lastrowid

    def finish_sfs_run(self, run_id: int, *, error: str | None = None) -> None:
        self._end("sfs_runs", run_id, error)

    def _end(self, table: str, row_id: int, error: str | None) -> None:
        """A job without a result of its own is done, or failed with the error."""
        with self._transaction():
            self.connection.execute(
                f"UPDATE {table} SET status = ?, error = ? WHERE id = ?",
                ("done" if error is None else "failed", error, row_id),
            )

    def sfs_runs(self) -> list[dict]:
        return self._rows("SELECT * FROM sfs_runs ORDER BY id")

    def sfs_run(self, run_id: int) -> dict | None:
        return self._row("sfs_runs", run_id)

    def sfs_run_trials(self, run_id: int) -> list[dict]:
        return self._rows("SELECT * FROM trials WHERE sfs_run_id = ? ORDER BY id", run_id)

    def add_replay_sweep(self, *, workload: str, target: str, specs: list[dict], prepare: bool) -> int:
        """Open a replay sweep (one trial per data-set size) before its first trial; returns its id."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO replay_sweeps (created, workload, target, settings, status) VALUES (?, ?, ?, ?, 'running')",
                (_now(), workload, without_passwords(target), _encode({"specs": specs, "prepare": prepare})),
            )
        return cursor.lastrowid

    def finish_replay_sweep(self, sweep_id: int, *, error: str | None = None) -> None:
        self._end("replay_sweeps", sweep_id, error)

    def replay_sweeps(self) -> list[dict]:
        return self._rows("SELECT * FROM replay_sweeps ORDER BY id")

    def replay_sweep(self, sweep_id: int) -> dict | None:
        return self._row("replay_sweeps", sweep_id)

    def replay_sweep_trials(self, sweep_id: int) -> list[dict]:
        return self._rows("SELECT * FROM trials WHERE replay_sweep_id = ? ORDER BY id", sweep_id)

    def trials(self) -> list[dict]:
        return self._rows("SELECT * FROM trials ORDER BY id")

    def plans(self) -> list[dict]:
        return self._rows("SELECT id, created, name, path, status, error, finished FROM plans ORDER BY id")

    def jobs(self, kinds: tuple[str, ...] = JOB_KINDS) -> list[dict]:
        """Every stored job, oldest first, as {kind, id, created, workload, target, status, verdict}:
        what `results list` shows. A trial of a search or sfs run is listed with its job, not alone."""
        jobs = []
        if "trial" in kinds:
            for trial in self._rows(
                "SELECT * FROM trials WHERE search_id IS NULL AND sfs_run_id IS NULL AND replay_sweep_id IS NULL"
                " ORDER BY id"
            ):
                result = trial["result"]
                verdict = (
                    f"achieved {TrialResult.load(result).achieved_rate:.1f} of {trial['rate']:g} ops/s"
                    if result
                    else trial["error"] or ""
                )
                jobs.append(_job("trial", trial, trial["workload"], trial["target"], verdict))
        if "search" in kinds:
            per_search = self._counts("SELECT search_id, count(*) FROM trials WHERE search_id IS NOT NULL GROUP BY 1")
            for search in self.searches():
                result = search["result"]
                verdict = result["message"] if result else search["error"] or ""
                trials = per_search.get(search["id"], 0)
                size = f"{trials} trials" if trials or not result else f"{result['trials']} simulated trials"
                jobs.append(_job("search", search, search["workload"], search["target"], verdict, size))
        if "sfs" in kinds:
            per_run = self._counts(
                "SELECT sfs_run_id, count(*) FROM trials WHERE sfs_run_id IS NOT NULL AND status = 'done' GROUP BY 1"
            )
            for run in self.sfs_runs():
                done = per_run.get(run["id"], 0)
                planned = len(run["settings"].get("loads", []))
                jobs.append(
                    _job(
                        "sfs",
                        run,
                        run["workload"],
                        run["target"],
                        run["error"] or "",
                        f"{done} of {planned} load points",
                    )
                )
        if "replay" in kinds:
            per_sweep = self._counts(
                "SELECT replay_sweep_id, count(*) FROM trials WHERE replay_sweep_id IS NOT NULL AND status = 'done'"
                " GROUP BY 1"
            )
            for sweep in self.replay_sweeps():
                done, planned = per_sweep.get(sweep["id"], 0), len(sweep["settings"]["specs"])
                jobs.append(
                    _job(
                        "replay",
                        sweep,
                        sweep["workload"],
                        sweep["target"],
                        sweep["error"] or "",
                        f"{done} of {planned} data-set sizes",
                    )
                )
        if "surface" in kinds:
            per_surface = self._counts(
                "SELECT surface_id, count(*) FROM searches WHERE surface_id IS NOT NULL GROUP BY 1"
            )
            for surface in self.surfaces():
                plan = surface["plan"]
                verdict = surface["error"] or ""
                # A fixed-rate plan's samples are trials, not searches: count the samples it measured.
                fixed = plan.get("fixed_rate") is not None
                samples = (
                    len((surface["result"] or {}).get("outcomes", [])) if fixed else per_surface.get(surface["id"], 0)
                )
                jobs.append(
                    _job(
                        "surface",
                        surface,
                        plan.get("workload", ""),
                        plan.get("target", ""),
                        verdict,
                        f"{samples} samples",
                    )
                )
        if "plan" in kinds:
            for plan in self.plans():
                jobs.append(_job("plan", plan, plan["name"], plan["path"], plan["error"] or ""))
        return sorted(jobs, key=lambda job: (job["created"], JOB_KINDS.index(job["kind"]), job["id"]))

    # Experiment plans (harness/): the plan with its expanded tests, every run of a test, and events.

    def add_plan(
        self, *, name: str, path: str, sources: dict, plan: dict, workdir: str, tests: list[dict], notes
    ) -> int:
        """The plan and all its tests (pending), with its notes as events, in one transaction; returns its id."""
        with self._transaction():
            now = _now()
            cursor = self.connection.execute(
                "INSERT INTO plans (created, name, path, sources, plan, workdir, status)"
                " VALUES (?, ?, ?, ?, ?, ?, 'running')",
                (now, name, path, _program(sources), _program(plan), workdir),
            )
            plan_id = cursor.lastrowid
            for test in tests:
                self.connection.execute(
                    "INSERT INTO plan_tests (plan_id, seq, name, kind, vars, settings, status)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                    (plan_id, test["seq"], test["name"], test["kind"], _program(test["vars"]), _program(test)),
                )
            for note in notes:
                self.connection.execute(
                    "INSERT INTO plan_events (plan_id, created, kind, message) VALUES (?, ?, 'note', ?)",
                    (plan_id, now, note),
                )
        return plan_id

    def add_plan_event(self, plan_id: int, test_id: int | None, kind: str, message: str, detail=None) -> None:
        with self._transaction():
            self.connection.execute(
                "INSERT INTO plan_events (plan_id, test_id, created, kind, message, detail) VALUES (?, ?, ?, ?, ?, ?)",
                (plan_id, test_id, _now(), kind, message, _encode(detail) if detail is not None else None),
            )

    def update_plan(self, plan_id: int, **columns) -> None:
        """Set a plan's status, error or finished."""
        self._update("plans", plan_id, columns, ("status", "error", "finished"))

    def update_plan_test(self, test_id: int, **columns) -> None:
        """Set a plan test's status, stop_reason or sysinfo."""
        self._update("plan_tests", test_id, columns, ("status", "stop_reason", "sysinfo"))

    def _update(self, table: str, row_id: int, columns: dict, allowed: tuple[str, ...]) -> None:
        unknown = set(columns) - set(allowed)
        if unknown:
            raise ValueError(f"{table} has no settable column {sorted(unknown)}")
        values = [_encode(v) if name in JSON_COLUMNS and v is not None else v for name, v in columns.items()]
        assignments = ", ".join(f"{name} = ?" for name in columns)
        with self._transaction():
            self.connection.execute(f"UPDATE {table} SET {assignments} WHERE id = ?", (*values, row_id))

    def insert_plan_run(
        self,
        *,
        plan_id: int,
        test_id: int,
        attempt: int,
        status: str,
        discarded: bool,
        metrics: dict,
        threads: list,
        hooks: list,
        cache: list,
        monitor: dict | None,
        sysinfo: dict,
        result: dict | None,
        trial_ids: list[int],
        error: str | None,
    ) -> int:
        """One run of a plan test, inside a transaction the caller holds (with its trials: see transaction())."""
        cursor = self.connection.execute(
            "INSERT INTO plan_runs (plan_id, test_id, attempt, created, status, discarded, metrics, threads, hooks,"
            " cache, monitor, sysinfo, result, trial_ids, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                plan_id,
                test_id,
                attempt,
                _now(),
                status,
                int(discarded),
                _encode(metrics),
                _encode(threads),
                _encode(hooks),
                _encode(cache),
                _encode(monitor) if monitor is not None else None,
                _encode(sysinfo),
                _encode(result) if result is not None else None,
                _encode(trial_ids),
                error,
            ),
        )
        return cursor.lastrowid

    def plan(self, plan_id: int) -> dict | None:
        return self._row("plans", plan_id)

    def plan_tests(self, plan_id: int) -> list[dict]:
        return self._rows("SELECT * FROM plan_tests WHERE plan_id = ? ORDER BY seq", plan_id)

    def plan_test(self, test_id: int) -> dict | None:
        return self._row("plan_tests", test_id)

    def plan_test_named(self, name: str, plan_id: int | None = None) -> dict | None:
        """The test of that name in plan_id, or in the newest plan that has one."""
        if plan_id is not None:
            rows = self._rows("SELECT * FROM plan_tests WHERE plan_id = ? AND name = ?", plan_id, name)
        else:
            rows = self._rows("SELECT * FROM plan_tests WHERE name = ? ORDER BY plan_id DESC LIMIT 1", name)
        return rows[0] if rows else None

    def plan_runs(self, test_id: int) -> list[dict]:
        return self._rows("SELECT * FROM plan_runs WHERE test_id = ? ORDER BY attempt", test_id)

    def plan_events(self, plan_id: int) -> list[dict]:
        return self._rows("SELECT * FROM plan_events WHERE plan_id = ? ORDER BY id", plan_id)

    def plan_done_runs(self, plan_id: int) -> int:
        return self.connection.execute(
            "SELECT COUNT(*) FROM plan_runs WHERE plan_id = ? AND status = 'done'", (plan_id,)
        ).fetchone()[0]

    def plan_summaries(self) -> list[dict]:
        """Every plan with its number of tests and of tests done: `peakbench plan list`."""
        return self._rows(
            "SELECT p.id, p.created, p.name, p.status, COUNT(t.id) AS tests,"
            " COALESCE(SUM(t.status = 'done'), 0) AS done FROM plans p LEFT JOIN plan_tests t ON t.plan_id = p.id"
            " GROUP BY p.id ORDER BY p.id"
        )

    def last_plan_id(self, unfinished: bool = False) -> int | None:
        """The newest plan's id (the newest not done, with unfinished); None if there is none."""
        where = " WHERE status != 'done'" if unfinished else ""
        return self.connection.execute(f"SELECT MAX(id) FROM plans{where}").fetchone()[0]

    def trial(self, trial_id: int) -> dict | None:
        return self._row("trials", trial_id)

    def trials_between(self, first: int, last: int) -> list[dict]:
        """The trials with first <= id <= last, in one query however wide the range."""
        return self._rows("SELECT * FROM trials WHERE id BETWEEN ? AND ? ORDER BY id", first, last)


def point_key(rate: float) -> float:
    """A load point's rate as stored trials are matched to the points an sfs run planned."""
    return round(rate, 6)


def _job(kind: str, row: dict, workload: str, target: str, verdict: str, size: str = "") -> dict:
    return {
        "kind": kind,
        "id": row["id"],
        "created": row["created"],
        "workload": workload,
        "target": target,
        "status": row["status"],
        "size": size,
        "verdict": verdict,
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _encode(value) -> str:
    """JSON for a column; no SMB password reaches the file (credentials.py)."""
    return json.dumps(without_passwords(value), default=str)


def _program(value) -> str:
    """JSON of a plan as written: the runner runs its commands from the store, so they are kept whole."""
    return json.dumps(value, default=str)


def _decode(row: sqlite3.Row) -> dict:
    record = dict(row)
    for column in JSON_COLUMNS:
        if record.get(column) is not None:
            record[column] = json.loads(record[column])
    return record
