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
    [  # version 3: SPECsfs-style load-point curves (`peakbench sfs`); their trials point at them
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
]
SCHEMA_VERSION = len(MIGRATIONS)
JSON_COLUMNS = ("notes", "spec", "result", "sysinfo", "settings")


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
    def __init__(self, path: Path = DEFAULT_PATH):
        self.path = Path(path)
        try:
            # Autocommit mode: transactions are opened explicitly, so that schema
            # changes (which sqlite3 would otherwise commit one by one) are atomic too.
            self.connection = sqlite3.connect(self.path, isolation_level=None)
            self.connection.row_factory = sqlite3.Row
            self.connection.execute("PRAGMA journal_mode = WAL")
            self._migrate()
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

    def add_trial(self, *, workload: str, target: str, spec: dict, sysinfo: dict, result: dict | None = None,
                  error: str | None = None, notes: list[str] = (), search_id: int | None = None,
                  sfs_run_id: int | None = None) -> int:
        """Store one trial (done if it has a result, failed otherwise); returns its id."""
        with self._transaction():  # the whole trial or nothing
            cursor = self.connection.execute(
                "INSERT INTO trials (created, workload, target, rate, status, error, notes, spec, result, sysinfo,"
                " search_id, sfs_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    _now(), workload, target, spec["load"]["rate"],
                    "done" if result is not None else "failed", error,
                    json.dumps(list(notes)), json.dumps(spec),
                    json.dumps(result) if result is not None else None, json.dumps(sysinfo), search_id,
                    sfs_run_id,
                ),
            )
        return cursor.lastrowid

    def add_search(self, *, workload: str, target: str, policy: str, settings: dict) -> int:
        """Open a search before its first trial, so every trial can point at it; returns its id."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO searches (created, workload, target, policy, settings, status)"
                " VALUES (?, ?, ?, ?, ?, 'running')",
                (_now(), workload, target, policy, json.dumps(settings)),
            )
        return cursor.lastrowid

    def finish_search(self, search_id: int, *, result: dict | None = None, error: str | None = None) -> None:
        with self._transaction():
            self.connection.execute(
                "UPDATE searches SET status = ?, result = ?, error = ? WHERE id = ?",
                ("done" if result is not None else "failed", json.dumps(result) if result is not None else None,
                 error, search_id),
            )

    def searches(self) -> list[dict]:
        return [_decode(row) for row in self.connection.execute("SELECT * FROM searches ORDER BY id")]

    def search(self, search_id: int) -> dict | None:
        row = self.connection.execute("SELECT * FROM searches WHERE id = ?", (search_id,)).fetchone()
        return _decode(row) if row is not None else None

    def search_trials(self, search_id: int) -> list[dict]:
        rows = self.connection.execute("SELECT * FROM trials WHERE search_id = ? ORDER BY id", (search_id,))
        return [_decode(row) for row in rows]

    def add_sfs_run(self, *, workload: str, target: str, settings: dict) -> int:
        """Open a load-point curve before its first trial; returns its id."""
        with self._transaction():
            cursor = self.connection.execute(
                "INSERT INTO sfs_runs (created, workload, target, settings, status) VALUES (?, ?, ?, ?, 'running')",
                (_now(), workload, target, json.dumps(settings)),
            )
        return cursor.lastrowid

    def finish_sfs_run(self, run_id: int, *, error: str | None = None) -> None:
        with self._transaction():
            self.connection.execute("UPDATE sfs_runs SET status = ?, error = ? WHERE id = ?",
                                    ("done" if error is None else "failed", error, run_id))

    def sfs_runs(self) -> list[dict]:
        return [_decode(row) for row in self.connection.execute("SELECT * FROM sfs_runs ORDER BY id")]

    def sfs_run(self, run_id: int) -> dict | None:
        row = self.connection.execute("SELECT * FROM sfs_runs WHERE id = ?", (run_id,)).fetchone()
        return _decode(row) if row is not None else None

    def sfs_run_trials(self, run_id: int) -> list[dict]:
        rows = self.connection.execute("SELECT * FROM trials WHERE sfs_run_id = ? ORDER BY id", (run_id,))
        return [_decode(row) for row in rows]

    def trials(self) -> list[dict]:
        rows = self.connection.execute("SELECT * FROM trials ORDER BY id").fetchall()
        return [_decode(row) for row in rows]

    def trial(self, trial_id: int) -> dict | None:
        row = self.connection.execute("SELECT * FROM trials WHERE id = ?", (trial_id,)).fetchone()
        return _decode(row) if row is not None else None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _decode(row: sqlite3.Row) -> dict:
    record = dict(row)
    for column in JSON_COLUMNS:
        if record.get(column) is not None:
            record[column] = json.loads(record[column])
    return record
