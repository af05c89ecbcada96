"""A small Postmark-like mail-server workload, for plans and tests.

    python3 -m peakbench.harness.postmark --dir DIR [--files 200] [--transactions 1000]
        [--min-size 512] [--max-size 16384] [--subdirs 10] [--seed 1] [--fsync]

Like Postmark (Katcher 1997): create a pool of files of random sizes in
subdirectories, run transactions that each pair a read or an append with a
create or a delete, then delete everything. Prints one JSON line:
{"transactions_per_s", "seconds", "transactions", "created", "deleted",
"read_bytes", "written_bytes"}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="postmark", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--transactions", type=int, default=1000)
    parser.add_argument("--min-size", type=int, default=512)
    parser.add_argument("--max-size", type=int, default=16384)
    parser.add_argument("--subdirs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("PEAKBENCH_RUN", "1")))
    parser.add_argument("--fsync", action="store_true", help="fsync every write (a mail server's habit)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed * 7919 + int(os.environ.get("PEAKBENCH_THREAD", "1")))
    root = args.dir / f"postmark-{os.getpid()}"
    dirs = [root / f"s{i}" for i in range(max(1, args.subdirs))]
    block = os.urandom(max(args.max_size, 4096))
    started = time.monotonic()
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    written = read = created = deleted = 0
    serial = 0

    def create() -> None:
        nonlocal written, created, serial
        serial += 1
        path = rng.choice(dirs) / f"f{serial}"
        size = rng.randint(args.min_size, args.max_size)
        with open(path, "wb") as file:
            file.write(block[:size])
            if args.fsync:
                os.fsync(file.fileno())
        files.append(path)
        written += size
        created += 1

    for _ in range(args.files):
        create()
    transaction_start = time.monotonic()
    for _ in range(args.transactions):
        if files and rng.random() < 0.5:
            path = rng.choice(files)
            with open(path, "rb") as file:
                read += len(file.read())
        elif files:
            path = rng.choice(files)
            size = rng.randint(1, args.max_size // 4 or 1)
            with open(path, "ab") as file:
                file.write(block[:size])
                if args.fsync:
                    os.fsync(file.fileno())
            written += size
        if files and rng.random() < 0.5:
            victim = files.pop(rng.randrange(len(files)))
            victim.unlink()
            deleted += 1
        else:
            create()
    transaction_seconds = time.monotonic() - transaction_start
    shutil.rmtree(root)
    seconds = time.monotonic() - started
    print(
        json.dumps(
            {
                "transactions_per_s": args.transactions / transaction_seconds if transaction_seconds > 0 else 0.0,
                "seconds": seconds,
                "transactions": args.transactions,
                "created": created,
                "deleted": deleted,
                "read_bytes": read,
                "written_bytes": written,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
