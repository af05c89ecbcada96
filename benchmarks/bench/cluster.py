"""`cluster`: the cost of distributing a trial over Dask load clients, and how throughput scales with clients."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import common
from common import EXAMPLE_MIX, RESULTS, ROOT, fileset, flat_out, header, save, table, trial_spec


def flat_row(label: str, results: list[dict], single: float, one_client: float | None) -> tuple[dict, dict]:
    """The table row and the stored record of one configuration's flat-out trials (median run reported)."""
    median = results[len(results) // 2]
    clients = median.get("clients") or [median]
    info = [r["cluster"] for r in results if "cluster" in r]
    achieved = median["achieved_rate"]
    record = {
        "achieved": achieved,
        "all": [r["achieved_rate"] for r in results],
        "clients": [c["achieved_rate"] for c in clients],
        "cpu_s": median["engine_cpu_s"],
        "server_cpu_s": median["server_cpu_s"],
        "start_skew_ms": [i["start_skew_ms"] for i in info],
        "merge_ms": [i["merge_s"] * 1e3 for i in info],
    }
    row = {
        "config": label,
        "achieved": achieved,
        "vs single": achieved / single,
        "vs 1 client": achieved / one_client if one_client else "-",
        "runs": " ".join(f"{r['achieved_rate']:,.0f}" for r in results),
        "per client": " ".join(f"{c['achieved_rate']:,.0f}" for c in clients),
        "skew_us": max(record["start_skew_ms"]) * 1e3 if info else "-",
        "merge_ms": sum(record["merge_ms"]) / len(info) if info else "-",
        "engine cpu_s": median["engine_cpu_s"],
    }
    if median["server_cpu_s"] is not None:
        row["nginx cpu_s"] = median["server_cpu_s"]
    return row, record


def merge_cost(result: dict, clients: int, repeats: int) -> dict:
    """What merging `clients` results costs the controller: `clients` copies of one engine's `result`
    merged `repeats` times (the histograms are full; equal copies merge no faster than different ones)."""
    from peakbench.cluster.merge import merge_results

    names = [f"client-{i}" for i in range(clients)]
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        merge_results([result] * clients, names)
        seconds.append(time.perf_counter() - t0)
    return {
        "clients": clients,
        "ops": len(result["ops"]),
        "rate": result["requested_rate"],
        "result_bytes": len(json.dumps(result)),
        "merge_s": seconds,
    }


def bench_cluster(name: str = "cluster") -> dict:
    """The cost of distributing a trial over Dask load clients, and how throughput scales with clients.

    Overhead: one aggregate rate run by one engine called directly, then by 1, 2 and 4 clients of a
    LocalCluster (peakbench.cluster.DistributedEngine): achieved rate, latency and schedule lag of the
    merged result next to the single engine's, and the coordination figures (connect, clock check,
    start lead, measured start skew, merge time, wall time per trial beyond warm-up + runtime).
    Scaling: the same clients offered far more than they can send, on null:// (12,000,000 ops/s
    aggregate) and on nginx (2 workers, 127.0.0.1, the same read-only mix over a 256-file docroot on
    /dev/shm shared by every client; 200,000 ops/s aggregate, 64 requests in flight in all): what the
    aggregate achieves with 1, 2 and 4 clients on this machine's cores, and the CPU the engines and
    nginx spent on it. Draws benchmarks/results/cluster-scaling.{png,svg}."""
    header("5. many load clients (Dask): overhead of distribution, null and nginx scaling")
    sys.path.insert(0, str(ROOT / "python"))
    os.environ["PEAKBENCH_ENGINE"] = str(common.ENGINE)
    from peakbench.cluster import DistributedEngine, connect
    from peakbench.cluster.clock import measure_offsets
    from peakbench.engine import Engine
    from peakbench.servers.nginx import Nginx

    rate, warmup_s, runtime_s, repeats = 100_000.0, 1.0, 5.0, 3
    flat_repeats = 3  # flat-out trials per config: the median is reported (a shared machine is noisy)
    flat_rate, flat_runtime_s = 12_000_000.0, 3.0  # far above what 4 engines on 2 cores can send
    # One engine gets 20,000-40,000 requests/s from nginx here: 200,000 is far above what any config can send.
    http_rate, http_in_flight, http_files = 200_000.0, 64, 256
    spec = trial_spec({"kind": "null"}, rate, EXAMPLE_MIX, fileset(1000), warmup_s=warmup_s, runtime_s=runtime_s)
    flat = trial_spec({"kind": "null"}, flat_rate, EXAMPLE_MIX, fileset(1000), warmup_s=0.5, runtime_s=flat_runtime_s)

    def figures(result: dict, wall_s: float, measured_s: float) -> dict:
        return {
            "achieved": result["achieved_rate"],
            "mean_us": result["latency"]["mean_ms"] * 1e3,
            "p99_us": result["latency"]["p99_ms"] * 1e3,
            "lag_p99_us": result["schedule_lag"]["p99_ms"] * 1e3,
            "saturated": result["generator_saturated"],
            "wall_s": wall_s,
            "overhead_s": wall_s - measured_s,
        }

    out: dict = {
        "rate": rate,
        "warmup_s": warmup_s,
        "runtime_s": runtime_s,
        "flat_rate": flat_rate,
        "flat_runtime_s": flat_runtime_s,
        "flat_repeats": flat_repeats,
        "http_rate": http_rate,
        "http_max_outstanding": http_in_flight,
        "http_files": http_files,
        "nginx_workers": 2,
        "configs": {},
        "nginx": {},
    }
    rows, flat_rows, http_rows = [], [], []
    single = Engine(common.ENGINE)
    www = Path(tempfile.mkdtemp(prefix="peakbench-bench-cluster-", dir="/dev/shm"))
    try:
        with Nginx(www, workers=2) as server:
            http = trial_spec(
                {"kind": "http", "url": server.url, "docroot": str(www)},
                http_rate,
                EXAMPLE_MIX,
                fileset(http_files, 4096),
                warmup_s=0.5,
                runtime_s=flat_runtime_s,
                max_outstanding=http_in_flight,
            )
            http["read"] = {"size": {"kind": "constant", "value": 4096}, "pattern": "whole_file"}
            single.prepare(http)  # once: every client reads the same docroot (a shared, read-only file set)
            loads = [
                ("null", flat, flat_rows, out["configs"], None),
                ("nginx", http, http_rows, out["nginx"], server.pid),
            ]
            one_client: dict[str, float] = {}
            base: dict[str, float] = {}

            runs = []
            for _ in range(repeats):
                t0 = time.monotonic()
                result = single.run(spec)
                runs.append(figures(result, time.monotonic() - t0, warmup_s + runtime_s))
            out["configs"]["single engine"] = {"trials": runs}
            out["merge_100"] = merge_cost(result, 100, repeats)
            best = min(runs, key=lambda r: r["p99_us"])
            rows.append(
                {
                    "config": "single engine",
                    **{k: best[k] for k in ("achieved", "mean_us", "p99_us", "lag_p99_us")},
                    "overhead_s": sum(r["overhead_s"] for r in runs) / repeats,
                    "skew_ms": "-",
                    "merge_ms": "-",
                }
            )
            for target, trial_spec_, table_rows, records, pid in loads:
                results = flat_out(single.run, trial_spec_, flat_repeats, pid)
                base[target] = results[len(results) // 2]["achieved_rate"]
                row, record = flat_row("single engine", results, base[target], None)
                table_rows.append(row)
                records.setdefault("single engine", {})["flat_out"] = record
            for clients in (1, 2, 4):
                label = f"{clients} client{'s' if clients > 1 else ''}"
                t0 = time.monotonic()
                with connect(clients=clients) as cluster:
                    connect_s = time.monotonic() - t0
                    t0 = time.monotonic()
                    offsets = measure_offsets(cluster)
                    clock_s = time.monotonic() - t0
                    engine_ = DistributedEngine(cluster, clock_tolerance_s=0.05)
                    runs = []
                    for _ in range(repeats):
                        t0 = time.monotonic()
                        result = engine_.run(spec)
                        info = result["cluster"]
                        runs.append(
                            {
                                **figures(result, time.monotonic() - t0, warmup_s + runtime_s),
                                "start_skew_ms": info["start_skew_ms"],
                                "skew_bound_ms": info["skew_bound_ms"],
                                "start_lead_s": info["start_lead_s"],
                                "merge_ms": info["merge_s"] * 1e3,
                                "lagging": result["lagging"],
                            }
                        )
                    out["configs"][label] = {
                        "connect_s": connect_s,
                        "clock_check_s": clock_s,
                        "clock": [o.to_dict() for o in offsets],
                        "trials": runs,
                    }
                    shared = DistributedEngine(cluster, clock_tolerance_s=0.05, shared_fileset=True)
                    for target, trial_spec_, table_rows, records, pid in loads:
                        engine_for = shared if target == "nginx" else engine_
                        results = flat_out(engine_for.run, trial_spec_, flat_repeats, pid)
                        one_client.setdefault(target, results[len(results) // 2]["achieved_rate"])
                        row, record = flat_row(label, results, base[target], one_client[target])
                        table_rows.append(row)
                        records.setdefault(label, {})["flat_out"] = record
                best = min(runs, key=lambda r: r["p99_us"])
                rows.append(
                    {
                        "config": label,
                        **{k: best[k] for k in ("achieved", "mean_us", "p99_us", "lag_p99_us")},
                        "overhead_s": sum(r["overhead_s"] for r in runs) / repeats,
                        "skew_ms": max(r["start_skew_ms"] for r in runs),
                        "merge_ms": sum(r["merge_ms"] for r in runs) / repeats,
                        "connect_s": connect_s,
                        "clock_check_ms": clock_s * 1e3,
                    }
                )
    finally:
        shutil.rmtree(www, ignore_errors=True)
    table(
        f"overhead at one aggregate rate ({rate:,.0f} ops/s null, best p99 of {repeats}; overhead = wall"
        f" per trial - warm-up - runtime, mean)",
        rows,
    )
    table(
        f"null-target flat out ({flat_rate:,.0f} ops/s offered in aggregate, {flat_runtime_s:g} s; median of"
        f" {flat_repeats} runs, per-client figures of the median run; skew: largest of the runs)",
        flat_rows,
    )
    table(
        f"nginx flat out ({http_rate:,.0f} ops/s offered in aggregate, {http_in_flight} in flight in all,"
        f" {flat_runtime_s:g} s; median of {flat_repeats} runs)",
        http_rows,
    )
    merge = out["merge_100"]
    print(
        f"\nmerging {merge['clients']} clients' results ({merge['ops']} ops, {merge['rate']:,.0f} ops/s, "
        f"{merge['result_bytes']:,} bytes each): {min(merge['merge_s']):.3f}-{max(merge['merge_s']):.3f} s"
        f" over {len(merge['merge_s'])} merges"
    )
    out["rows"], out["flat_rows"], out["http_rows"] = rows, flat_rows, http_rows
    save(name, out)
    for path in cluster_figure(out):
        print(f"  -> {path.relative_to(ROOT)}")
    return out


def cluster_figure(out: dict) -> list[Path]:
    """Aggregate achieved rate against clients, null and nginx side by side: the median of the flat-out
    runs, their range as a bar, the single engine dotted, and what perfect scaling to the 2 cores gives."""
    from peakbench.report import figures

    counts, cores = (1, 2, 4), os.cpu_count() or 1
    fig, axes = figures.new_figure(1, 2, height_in=2.2, width_in=2 * figures.COLUMN_WIDTH_IN)
    panels = (("null://", out["configs"]), (f"nginx ({out['nginx_workers']} workers) on 127.0.0.1", out["nginx"]))
    with figures.style():
        for ax, (title, records) in zip(axes[0], panels):
            flats = [records[f"{n} client{'s' if n > 1 else ''}"]["flat_out"] for n in counts]
            medians = [f["achieved"] / 1e3 for f in flats]
            low = [m - min(f["all"]) / 1e3 for m, f in zip(medians, flats)]
            high = [max(f["all"]) / 1e3 - m for m, f in zip(medians, flats)]
            ax.errorbar(
                counts,
                medians,
                yerr=[low, high],
                marker="o",
                capsize=2,
                color=figures.COLOURS[0],
                label=f"aggregate (median of {len(flats[0]['all'])}, range)",
            )
            ax.plot(
                counts,
                [medians[0] * min(n, cores) for n in counts],
                linestyle="--",
                color="grey",
                linewidth=0.8,
                label=f"1 client × min(n, {cores} cores)",
            )
            ax.axhline(
                records["single engine"]["flat_out"]["achieved"] / 1e3,
                linestyle=":",
                color=figures.COLOURS[1],
                label="one engine, no Dask",
            )
            ax.set_title(title)
            ax.set_xlabel(f"load clients ({cores} cores)")
            ax.set_ylabel("achieved kops/s")
            ax.set_xticks(counts)
            ax.set_ylim(bottom=0)
        axes[0][0].legend(loc="lower right")
    paths = figures.save(fig, RESULTS, "cluster-scaling", ("png", "svg"))
    figures.close(fig)
    return paths
