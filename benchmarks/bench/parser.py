"""`parser`: the replay parser on a generated ~1 GB Combined-format log against reading the same bytes."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from common import ROOT, SPEC_SCHEMA_V2, Proc, drop_page_cache, engine, header, run, save, table


def bench_parser(name: str = "parser") -> dict:
    """The replay parser on a generated ~1 GB Combined-format log against reading the same bytes: dd
    with the page cache dropped (cold) and kept (warm); the engine with every core and pinned to one;
    and the gzip-compressed log beside zcat (one deflate stream: its decompression cannot be split)."""
    header("5b. Replay parser: a ~1 GB access log, parsed vs read from disk")
    sys.path.insert(0, str(ROOT / "python"))
    from peakbench import tracegen

    log = (
        Path(tempfile.gettempdir()) / f"peakbench-bench-parser-{os.getpid()}.log"
    )  # on disk, not tmpfs: a cold read is real
    gz = log.with_name(log.name + ".gz")
    chunk = "\n".join(tracegen.lines(tracegen.TraceShape(requests=200_000, files=50_000, seed=3))) + "\n"
    repeats = max(1, round(1e9 / len(chunk)))
    out: dict = {"cpus": os.cpu_count(), "lines": chunk.count("\n") * repeats}
    rows = []

    def parse(path: Path, cpus: set[int] | None = None) -> dict:
        t = engine(
            "run",
            {
                "schema": SPEC_SCHEMA_V2,
                "target": {"kind": "null"},
                "load": {"runtime_s": 0.01, "rate": 1},
                "replay": {"log": str(path), "format": "combined"},
            },
            cpus=cpus,
            timeout=900,
        )
        r = t.result["replay"]
        if r["lines"] != out["lines"]:
            raise RuntimeError(f"parsed {r['lines']} lines of {out['lines']}")
        # engine_cpu_s covers the whole run, which is almost all parsing (the trial itself is 0.01 s).
        return {"parse_s": r["parse_s"], "cpu_s": t.result["engine_cpu_s"], "rss_kib": t.result["peak_rss_kib"]}

    def row(what: str, path: Path, size: int, p: dict, read: Proc | None = None) -> None:
        rows.append(
            {
                "run": what,
                "MB": size / 1e6,
                "load 1m": os.getloadavg()[0],
                "parse s": p["parse_s"],
                "CPU s": p["cpu_s"],
                "lines/s": out["lines"] / p["parse_s"],
                "MB/s (wall)": size / p["parse_s"] / 1e6,
                "MB per CPU-s": size / p["cpu_s"] / 1e6,
                "read MB/s": size / read.wall_s / 1e6 if read else None,
                "parse ÷ read": read.wall_s / p["parse_s"] if read else None,
                "RSS MiB": p["rss_kib"] / 1024,
            }
        )

    try:
        with open(log, "w") as f:
            for _ in range(repeats):
                f.write(chunk)
        size = log.stat().st_size
        out["bytes"] = size
        for cache in ("cold", "warm"):
            if cache == "cold":
                drop_page_cache()
            dd = run(["dd", f"if={log}", "of=/dev/null", "bs=1M"], timeout=600)
            if cache == "cold":
                drop_page_cache()
            p = parse(log)
            out[f"{cache}"] = {**p, "dd_s": dd.wall_s, "dd_cpu_s": dd.cpu_s, "load": os.getloadavg()[0]}
            row(f"{cache}, every core vs dd", log, size, p, dd)
        p = parse(log, cpus={0})
        out["warm_one_core"] = {**p, "load": os.getloadavg()[0]}
        row("warm, one core", log, size, p)
        run(["sh", "-c", f"exec gzip -c {log} > {gz}"], timeout=900)
        zsize = gz.stat().st_size
        zcat = run(["sh", "-c", f"exec zcat {gz} > /dev/null"], timeout=600)
        p = parse(gz)
        out["gzip"] = {
            **p,
            "gz_bytes": zsize,
            "zcat_s": zcat.wall_s,
            "zcat_cpu_s": zcat.cpu_s,
            "load": os.getloadavg()[0],
        }
        row("gzip (warm), every core vs zcat", gz, size, p, zcat)
    finally:
        log.unlink(missing_ok=True)
        gz.unlink(missing_ok=True)
    table(
        f"replay parser: {out['lines']:,} Combined-format lines ({size / 1e6:,.0f} MB of log text; gzip rows: MB uncompressed);"
        " read = dd (zcat for gzip)",
        rows,
    )
    save(name, out)
    return out
