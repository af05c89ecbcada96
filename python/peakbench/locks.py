"""Who is working on a store, or on one job in it: an flock on a file beside the store.

The kernel drops the lock when its holder dies, even by kill -9, so a lock
that is held always means a live holder, and `resume` can tell a job that is
still running from one whose controller is gone.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
from pathlib import Path

from .errors import RunError


class StoreLock:
    """The store's lock (plans take it whole), or with `job` ("search 3") the lock of one job."""

    def __init__(self, db: Path, job: str | None = None):
        self.job = job
        self.path = Path(f"{db}.{job.replace(' ', '-')}.lock" if job else f"{db}.lock")
        self.db = Path(db)
        self.file = None

    def acquire(self, what: str) -> None:
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            self.file = None
            if self.job:
                raise RunError(f"{self.job} in {self.db} is still running ({holder})") from None
            raise RunError(
                f"{self.db} is in use by another peakbench plan ({holder});"
                " wait for it to finish, or give this plan another --db"
            ) from None
        self.file.seek(0)
        self.file.truncate()
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.file.write(f"pid {os.getpid()} on {socket.gethostname()}, {what}, since {now}\n")
        self.file.flush()

    def release(self) -> None:
        if self.file is not None:
            self.file.seek(0)
            self.file.truncate()
            fcntl.flock(self.file.fileno(), fcntl.LOCK_UN)
            self.file.close()
            self.file = None
            if self.job:
                self.path.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()
