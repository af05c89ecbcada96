"""A small synthetic access-log generator for tests and demos.

Zipf-popular files with long-tailed (lognormal) sizes, arrivals at a diurnal
rate (a sinusoid over the day), mostly 200 GETs with some conditional GETs
answered 304, some HEADs, some 404s for paths that do not exist, and a few
non-GET methods, written in the Combined (default) or Common Log Format;
gzip-compressed when the file name ends in .gz. Deterministic for a seed.

    peakbench tracegen access.log --requests 10000 --files 500
"""

from __future__ import annotations

import bisect
import dataclasses
import gzip
import math
import random
import time
from pathlib import Path

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "curl/7.88.1", "Wget/1.21", "Mozilla/5.0 (Macintosh)")


@dataclasses.dataclass
class TraceShape:
    requests: int = 10_000
    files: int = 500
    alpha: float = 0.75  # Zipf popularity
    mean_size: float = 10_500.0  # bytes (Fstress web server: mean 10.5 KB, median 1.3 KB)
    median_size: float = 1_300.0
    max_size: float = 10_000_000.0
    rate: float = 20.0  # mean requests per second
    diurnal: float = 0.5  # amplitude of the daily rate swing (0: flat)
    not_modified: float = 0.05  # share answered 304
    head: float = 0.02
    missing: float = 0.02  # share of 404s
    other_methods: float = 0.01  # POSTs (not replayed)
    start: float = 1_700_000_000.0  # epoch seconds of the first request
    seed: int = 1
    format: str = "combined"  # or "common"


def clf_time(epoch: float) -> str:
    t = time.gmtime(epoch)
    return f"{t.tm_mday:02d}/{MONTHS[t.tm_mon - 1]}/{t.tm_year}:{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} +0000"


def file_table(shape: TraceShape, rng: random.Random) -> tuple[list[str], list[int], list[float]]:
    """Paths, sizes and cumulative popularity (Zipf over a random rank order)."""
    sigma = math.sqrt(2 * math.log(shape.mean_size / shape.median_size)) if shape.mean_size > shape.median_size else 0.0
    mu = math.log(shape.median_size)
    paths, sizes = [], []
    for i in range(shape.files):
        if i % 50 == 0:
            paths.append(f"/d{i // 50}/")  # a directory: served as its index.html
        else:
            paths.append(f"/d{i // 50}/f{i}.{('html', 'gif', 'jpg', 'pdf')[i % 4]}")
        sizes.append(int(min(shape.max_size, rng.lognormvariate(mu, sigma))))
    ranks = list(range(1, shape.files + 1))
    rng.shuffle(ranks)
    weights = [r**-shape.alpha for r in ranks]
    total = sum(weights)
    cumulative, acc = [], 0.0
    for w in weights:
        acc += w / total
        cumulative.append(acc)
    return paths, sizes, cumulative


def lines(shape: TraceShape):
    """The log's lines, in order."""
    rng = random.Random(shape.seed)
    paths, sizes, cumulative = file_table(shape, rng)
    t = shape.start
    for n in range(shape.requests):
        day = (t % 86_400) / 86_400
        rate = shape.rate * (1 + shape.diurnal * math.sin(2 * math.pi * day))
        t += rng.expovariate(max(rate, 1e-3))
        host = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        u = rng.random()
        method, status = "GET", 200
        i = min(bisect.bisect_left(cumulative, rng.random()), shape.files - 1)
        path, size = paths[i], sizes[i]
        if u < shape.other_methods:
            method, size = "POST", 0
        elif u < shape.other_methods + shape.missing:
            path, status, size = f"/missing/{n}.html", 404, 153
        elif u < shape.other_methods + shape.missing + shape.head:
            method, size = "HEAD", 0
        elif u < shape.other_methods + shape.missing + shape.head + shape.not_modified:
            status, size = 304, 0
        line = f'{host} - - [{clf_time(t)}] "{method} {path} HTTP/1.1" {status} {size}'
        if shape.format == "combined":
            line += f' "-" "{AGENTS[n % len(AGENTS)]}"'
        yield line


def write(path: Path, shape: TraceShape) -> Path:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="ascii") as out:
        for line in lines(shape):
            out.write(line + "\n")
    return path
