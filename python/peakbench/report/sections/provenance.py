"""Provenance: what produced these numbers, and every warning a reader must see.

Warnings: what the selection lacks (a search still running, load points never
run), failed trials, trials where the load generator saturated (their numbers
measure peakbench, not the target), requests never sent, op errors, and the
notes stored with trials (e.g. a mix that had to be normalised). Then the
system snapshot(s), the settings of each search or sfs run, and the exact
spec of every trial, collapsed.
"""

from __future__ import annotations

import html
import json

from ...contract import TrialResult
from ...sysinfo import peakbench_version
from ...units import format_size
from ..model import Column, Html, ReportData, ReportOptions, Section, Table

SNAPSHOT_FIELDS = (
    ("os", "OS"),
    ("kernel", "kernel"),
    ("machine", "machine"),
    ("hostname", "host"),
    ("cpu_model", "CPU"),
    ("cpu_count", "CPUs"),
    ("memory_bytes", "memory"),
    ("python", "Python"),
    ("peakbench_version", "peakbench"),
    ("engine_version", "engine"),
)


def warnings(data: ReportData) -> list[str]:
    found = list(data.missing)
    trials = data.trials
    failed = [t for t in trials if t["status"] != "done"]
    if failed:
        reasons = sorted({(t["error"] or "no reason stored") for t in failed})
        found.append(f"{len(failed)} failed trial(s) ({_ids(failed)}): {'; '.join(reasons)}")
    done = [t for t in trials if t["status"] == "done"]
    results = {t["id"]: TrialResult.load(t["result"]) for t in done}
    saturated = [t for t in done if results[t["id"]].generator_saturated]
    if saturated:
        found.append(
            f"the load generator saturated in {len(saturated)} trial(s) ({_ids(saturated)}): their numbers"
            " measure peakbench's limit on this machine, not the target's"
        )
    unsent = [t for t in done if results[t["id"]].unsent]
    if unsent:
        found.append(
            f"{sum(results[t['id']].unsent for t in unsent):,} requests were due but never sent in"
            f" {len(unsent)} trial(s) ({_ids(unsent)})"
        )
    erring = [
        t
        for t in done
        if any(sum((op.errors or {}).values()) + (op.timeouts or 0) for op in results[t["id"]].ops.values())
    ]
    if erring:
        found.append(
            f"operations failed (errors or timeouts) in {len(erring)} trial(s) ({_ids(erring)}); see the"
            " per-operation breakdown"
        )
    notes: dict[str, list[dict]] = {}
    for trial in trials:
        for note in trial["notes"]:
            notes.setdefault(note, []).append(trial)
    found += [f"{note} ({len(ts)} trial(s))" for note, ts in notes.items()]
    return found


def _ids(trials: list[dict]) -> str:
    ids = [str(t["id"]) for t in trials]
    return "trial " + ", ".join(ids[:12]) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")


def section(data: ReportData, options: ReportOptions) -> Section:
    found = warnings(data)
    blocks = []
    if found:
        items = "".join(f"<li>{html.escape(w)}</li>" for w in found)
        blocks.append(Html(f'<ul class="warnings">{items}</ul>'))
    else:
        blocks.append(
            Html(
                '<p class="ok">No warnings: every trial completed, the generator kept its schedule,'
                " and no operation failed.</p>"
            )
        )
    blocks.append(
        Html(
            f"<p>Built by peakbench {html.escape(peakbench_version())} from the store"
            f" <code>{html.escape(data.store_path)}</code>; rebuild it any time with"
            f" <code>peakbench report {html.escape(' '.join(_selectors(data)))} --db"
            f" {html.escape(data.store_path)}</code>.</p>"
        )
    )
    blocks.append(_snapshot_table(data))
    for series in data.series:
        if series.record is not None:
            record = {k: v for k, v in series.record.items() if k != "result"}
            blocks.append(
                Html(
                    f"<details><summary>Settings of {html.escape(series.key)}</summary>"
                    f"<pre>{html.escape(json.dumps(record, indent=2))}</pre></details>"
                )
            )
    specs = "".join(
        f'<details class="spec"><summary>trial {t["id"]}: {html.escape(t["workload"])} at {t["rate"]:g} ops/s,'
        f" {html.escape(t['status'])}, {html.escape(t['created'])}</summary>"
        f"<pre>{html.escape(json.dumps(t['spec'], indent=2))}</pre></details>"
        for t in data.trials
    )
    blocks.append(Html(f"<details><summary>Exact spec of every trial ({len(data.trials)})</summary>{specs}</details>"))
    return Section("provenance", "Provenance and warnings", blocks, summary=[f"warning: {w}" for w in found])


def _selectors(data: ReportData) -> list[str]:
    chosen = []
    for series in data.series:
        if series.kind in ("search", "sfs"):
            chosen.append(series.key.replace(" ", ":"))
        else:
            ids = [t["id"] for t in series.trials]
            chosen.append(
                f"trial:{ids[0]}-{ids[-1]}"
                if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1
                else " ".join(f"trial:{i}" for i in ids)
            )
    return chosen


def _snapshot_table(data: ReportData) -> Table:
    snapshots: list[tuple[str, list[dict]]] = []
    for trial in data.trials:
        key = json.dumps(trial["sysinfo"], sort_keys=True)
        for known, members in snapshots:
            if known == key:
                members.append(trial)
                break
        else:
            snapshots.append((key, [trial]))
    columns = [Column("field")] + [Column(f"snapshot {i + 1}") for i in range(len(snapshots))]
    rows = []
    infos = [json.loads(key) for key, _ in snapshots]
    for field, label in SNAPSHOT_FIELDS:
        values = [info.get(field) for info in infos]
        rows.append([label, *[format_size(v) if field == "memory_bytes" and v else v for v in values]])
    rows.append(["target file system", *[_fs(info.get("target_fs")) for info in infos]])
    rows.append(["trials", *[_ids(members) for _, members in snapshots]])
    basis = (
        "one system snapshot for all trials"
        if len(snapshots) == 1
        else f"{len(snapshots)} different system snapshots: compare across them with care"
    )
    return Table("system", "System snapshot", columns, rows, basis, terminal=False)


def _fs(fs: dict | None) -> str | None:
    if not fs:
        return None
    return f"{fs['fs_type']} on {fs['device']} at {fs['mount_point']} ({fs['mount_options']})"
