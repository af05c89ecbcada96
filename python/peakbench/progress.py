"""Live progress of an engine call, from the JSON lines the engine prints on stderr.

On a terminal: a Rich progress bar (phase, time, sent/completed, current rate,
schedule lag). Otherwise (a log file, CI): one plain line per update, so the
output stays readable and greppable.

Fields read from a progress line, all optional: phase (prepare, warmup,
measure, drain), elapsed_s, completed, outstanding, rate (completions per
second over the last interval), lag_ms; prepare sends done/total (files).
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


def describe(event: dict) -> str:
    """The numbers of one progress line, e.g. "done 3600  in flight 2  300.1 ops/s  lag 0.05 ms"."""
    parts = []
    if "done" in event:
        parts.append(f"{event['done']}/{event['total']}" if "total" in event else f"{event['done']} done")
    if "completed" in event:
        parts.append(f"done {event['completed']}")
    if "outstanding" in event:
        parts.append(f"in flight {event['outstanding']}")
    if "rate" in event:
        parts.append(f"{event['rate']:.1f} ops/s")
    if "lag_ms" in event:
        parts.append(f"lag {event['lag_ms']:.2f} ms")
    return "  ".join(parts)


class ProgressDisplay:
    """Call with each progress event; use as a context manager around the engine call.

    `duration_s` is how long the step should take (warm-up + run), which gives
    the bar its length; None when unknown (prepare), then the bar follows done/total.
    """

    def __init__(self, step: str, duration_s: float | None, stream: TextIO | None = None):
        self.step = step
        self.duration_s = duration_s
        self.stream = stream or sys.stderr
        self.bar: Progress | None = None

    def __enter__(self) -> ProgressDisplay:
        if self.stream.isatty():
            self.bar = Progress(
                TextColumn("[bold]{task.description:<8}"),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[numbers]}"),
                console=Console(file=self.stream),
            )
            self.task = self.bar.add_task(self.step, total=self.duration_s, numbers="starting")
            self.bar.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, event: dict) -> None:
        phase = event.get("phase", self.step)
        if self.bar is None:
            elapsed = f" {event['elapsed_s']:6.1f} s" if "elapsed_s" in event else ""
            print(f"{phase:<8}{elapsed}  {describe(event)}", file=self.stream, flush=True)
            return
        update = {"description": phase, "numbers": describe(event)}
        if "done" in event and "total" in event:
            update.update(completed=event["done"], total=event["total"])
        elif "elapsed_s" in event:
            update["completed"] = event["elapsed_s"]
        self.bar.update(self.task, **update)
