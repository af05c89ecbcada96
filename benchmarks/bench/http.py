"""`http`: peakbench's HTTP target against wrk on one nginx serving a 10 KB file."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import common
from common import ROOT, SPEC_SCHEMA_V2, engine, header, median_range, save, table, wrk


def peak_threads(samples: list[int]):
    """A `watch` for run(): appends the process's thread count (/proc/PID/status Threads) to `samples`."""

    def watch(pid: int) -> None:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return  # already gone
        samples.extend(int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:"))

    return watch


def bench_http(name: str = "http") -> dict:
    """peakbench's HTTP target against wrk on one nginx serving a 10 KB file (closed loop, requests per
    CPU-second of the load generator, ROUNDS rounds), open-loop latency at fractions of that rate, and an
    open-loop run at twice a slow server's capacity (M/D/1, D = 5 ms) with the engine's thread count sampled.
    PB_HTTP_BASELINE=PATH adds the same rows for another engine binary (e.g. main's), for an A/B in one run."""
    header("5. HTTP: peakbench vs wrk on nginx (10 KB file)")
    sys.path.insert(0, str(ROOT / "python"))
    from peakbench.servers.mdc import MDCServer
    from peakbench.servers.nginx import Nginx

    seconds, rounds = 5.0, 3
    ncpu = os.cpu_count() or 1
    client_cpus, server_cpus = ({0}, {1}) if ncpu >= 2 else ({0}, {0})
    baseline = os.environ.get("PB_HTTP_BASELINE")
    engines = [("peakbench", common.ENGINE)] + (
        [(f"peakbench {Path(baseline).name} (baseline)", Path(baseline))] if baseline else []
    )
    work = Path(tempfile.mkdtemp(prefix="peakbench-bench-http-", dir="/dev/shm"))
    out: dict = {
        "file_bytes": 10240,
        "seconds": seconds,
        "rounds": rounds,
        "client_cpus": sorted(client_cpus),
        "server_cpus": sorted(server_cpus),
        "baseline": baseline,
    }
    try:
        www = work / "www"
        www.mkdir()
        (www / "f10k.bin").write_bytes(os.urandom(10240))
        log = work / "one.log"
        log.write_text('h - - [01/Jan/2024:00:00:00 +0000] "GET /f10k.bin HTTP/1.1" 200 10240\n')

        def spec(url: str, **load) -> dict:
            return {
                "schema": SPEC_SCHEMA_V2,
                "target": {"kind": "http", "url": url},
                "load": {"runtime_s": seconds, "warmup_s": 0.0, **load},
                "replay": {"log": str(log), "format": "common"},
            }

        rows, closed, ratios = [], {}, {}
        with Nginx(www, workers=1, cpus=server_cpus) as server:
            url = server.url + "f10k.bin"
            for round_ in range(rounds):
                for conns in (1, 16, 64):
                    w = wrk(url, conns, seconds, client_cpus)
                    out.setdefault(f"closed_{conns}", []).append({"wrk": w})
                    rows.append(
                        {
                            "round": round_ + 1,
                            "connections": conns,
                            "tool": "wrk -t1",
                            "req/s": w["rate"],
                            "CPU s": w["cpu_s"],
                            "req per CPU-s": w["per_cpu_s"],
                            "mean ms": w["mean_ms"],
                            "p99 ms": w["p99_ms"],
                            "errors": w["errors"],
                            "÷ wrk": 1.0,
                        }
                    )
                    for label, binary in engines:
                        r = engine("run", spec(server.url, clients=conns), cpus=client_cpus, binary=binary).result
                        pb_per_cpu = r["issued"] / max(r["engine_cpu_s"], 1e-9)
                        ratio = pb_per_cpu / max(w["per_cpu_s"], 1e-9)
                        ratios.setdefault((label, conns), []).append(ratio)
                        if binary == common.ENGINE:
                            closed[conns] = r["achieved_rate"]
                        errors = sum(sum(op["errors"].values()) + op["timeouts"] for op in r["ops"].values())
                        out[f"closed_{conns}"][-1][label] = {
                            "rate": r["achieved_rate"],
                            "issued": r["issued"],
                            "cpu_s": r["engine_cpu_s"],
                            "per_cpu_s": pb_per_cpu,
                            "errors": errors,
                            "mean_ms": r["latency"]["mean_ms"],
                            "p99_ms": r["latency"]["p99_ms"],
                            "threads": r["outstanding"]["threads"],
                            "÷ wrk": ratio,
                        }
                        rows.append(
                            {
                                "round": round_ + 1,
                                "connections": conns,
                                "tool": f"{label} closed",
                                "req/s": r["achieved_rate"],
                                "CPU s": r["engine_cpu_s"],
                                "req per CPU-s": pb_per_cpu,
                                "mean ms": r["latency"]["mean_ms"],
                                "p99 ms": r["latency"]["p99_ms"],
                                "errors": errors,
                                "÷ wrk": ratio,
                            }
                        )
            table("closed loop: requests per CPU-second of the load generator (generator pinned to its own CPU)", rows)
            summary = [{"tool": label, "connections": conns, **median_range(v)} for (label, conns), v in ratios.items()]
            out["ratio_summary"] = summary
            table(f"requests per CPU-second ÷ wrk's, over {rounds} rounds", summary)
            open_rows = []
            for share in (0.5, 0.9):
                rate = round(closed[64] * share)
                t = engine("run", spec(server.url, rate=rate), cpus=client_cpus)
                r = t.result
                out[f"open_{share}"] = {"rate": rate, **t.summary(), "p999_ms": r["latency"]["p999_ms"]}
                open_rows.append(
                    {
                        "offered": rate,
                        "share of closed-64 rate": share,
                        "achieved": r["achieved_rate"],
                        "mean ms": r["latency"]["mean_ms"],
                        "p99 ms": r["latency"]["p99_ms"],
                        "p99.9 ms": r["latency"]["p999_ms"],
                        "lag p99 ms": r["schedule_lag"]["p99_ms"],
                        "saturated": r["generator_saturated"],
                    }
                )
            table("open loop: latency from the intended send time (wrk cannot report this)", open_rows)

        # Twice a slow server's capacity: requests pile up (about rate/2 x runtime of them at the end);
        # each must cost memory, not a thread.
        capacity, overload_s = 200.0, 10.0  # M/D/1 with D = 5 ms
        overload_rows = []
        with MDCServer(workers=1, service_ms=5.0, docroot=www) as slow:
            for label, binary in engines:
                samples: list[int] = []
                overload = spec(slow.url, rate=2 * capacity, runtime_s=overload_s, drain_timeout_s=2.0)
                t = engine("run", overload, cpus=client_cpus, binary=binary, watch=peak_threads(samples))
                r = t.result
                row = {
                    "engine": label,
                    "offered": 2 * capacity,
                    "achieved": r["achieved_rate"],
                    "peak threads (sampled)": max(samples, default=0),
                    "samples": len(samples),
                    "max in flight": r["outstanding"]["max"],
                    "peak RSS MiB": r["peak_rss_kib"] / 1024,
                    "engine CPU s": r["engine_cpu_s"],
                    "mean ms": r["latency"]["mean_ms"],
                    "loadavg after": Path("/proc/loadavg").read_text().split()[0],
                }
                overload_rows.append(row)
        out["overload"] = overload_rows
        table(f"open loop at 2x an M/D/1 server's capacity ({capacity:.0f} req/s), {overload_s:.0f} s", overload_rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save(name, out)
    return out
