"""`https`: what TLS costs, peakbench (rustls) and wrk (OpenSSL) on the same nginx."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import ROOT, SPEC_SCHEMA_V2, engine, header, median_range, save, table, wrk


def bench_https(name: str = "https") -> dict:
    """What TLS costs: peakbench (rustls, ca=FILE) and wrk (OpenSSL) on the same nginx serving a 10 KB file
    over HTTPS and, for the ratio, over plain HTTP; closed loop, requests per CPU-second of the load
    generator, ROUNDS rounds at 1 and 16 connections (each a new TLS session at the start, then kept alive)."""
    header("5b. HTTPS: peakbench (rustls) vs wrk (OpenSSL) on nginx (10 KB file)")
    sys.path.insert(0, str(ROOT / "python"))
    from peakbench.servers.nginx import Nginx, make_certificates

    seconds, rounds = 5.0, 3
    client_cpus, server_cpus = ({0}, {1}) if (os.cpu_count() or 1) >= 2 else ({0}, {0})
    work = Path(tempfile.mkdtemp(prefix="peakbench-bench-https-", dir="/dev/shm"))
    out: dict = {"file_bytes": 10240, "seconds": seconds, "rounds": rounds}
    try:
        www, certs = work / "www", make_certificates(Path(tempfile.mkdtemp(dir=work)))
        www.mkdir()
        (www / "f10k.bin").write_bytes(os.urandom(10240))
        log = work / "one.log"
        log.write_text('h - - [01/Jan/2024:00:00:00 +0000] "GET /f10k.bin HTTP/1.1" 200 10240\n')
        rows, ratios = [], {}
        tls = (certs / "server.pem", certs / "server.key")
        with (
            Nginx(www, workers=1, cpus=server_cpus) as plain,
            Nginx(www, workers=1, cpus=server_cpus, tls=tls) as secure,
        ):
            urls = {"http": plain.url, "https": secure.url}
            for round_ in range(rounds):
                for conns in (1, 16):
                    for scheme, url in urls.items():
                        w = wrk(url + "f10k.bin", conns, seconds, client_cpus)
                        target = url + (f"?ca={certs / 'ca.pem'}" if scheme == "https" else "")
                        spec = {
                            "schema": SPEC_SCHEMA_V2,
                            "target": {"kind": "http", "url": target},
                            "load": {"runtime_s": seconds, "warmup_s": 0.0, "clients": conns},
                            "replay": {"log": str(log), "format": "common"},
                        }
                        r = engine("run", spec, cpus=client_cpus).result
                        errors = sum(sum(op["errors"].values()) + op["timeouts"] for op in r["ops"].values())
                        per_cpu = r["issued"] / max(r["engine_cpu_s"], 1e-9)
                        for tool, rate, cpu_s, n_per_cpu, errs in (
                            ("wrk -t1", w["rate"], w["cpu_s"], w["per_cpu_s"], w["errors"]),
                            ("peakbench", r["achieved_rate"], r["engine_cpu_s"], per_cpu, errors),
                        ):
                            ratios.setdefault((tool, scheme, conns), []).append(n_per_cpu)
                            rows.append({"round": round_ + 1, "connections": conns, "scheme": scheme, "tool": tool,
                                         "req/s": rate, "CPU s": cpu_s, "req per CPU-s": n_per_cpu, "errors": errs})  # fmt: skip
            table("closed loop: requests per CPU-second of the load generator", rows)
        summary = []
        for conns in (1, 16):
            for scheme in urls:
                pb, wk = ratios[("peakbench", scheme, conns)], ratios[("wrk -t1", scheme, conns)]
                summary.append({"connections": conns, "scheme": scheme, "what": "peakbench ÷ wrk",
                                **median_range([a / b for a, b in zip(pb, wk)])})  # fmt: skip
            for tool in ("peakbench", "wrk -t1"):
                https, http = ratios[(tool, "https", conns)], ratios[(tool, "http", conns)]
                summary.append({"connections": conns, "scheme": "https ÷ http", "what": tool,
                                **median_range([a / b for a, b in zip(https, http)])})  # fmt: skip
        out["rows"], out["summary"] = rows, summary
        table(f"ratios of requests per CPU-second, per round (n = {rounds})", summary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save(name, out)
    return out
