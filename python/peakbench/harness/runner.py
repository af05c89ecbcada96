"""Running a plan, crash-safely.

The store is the checkpoint. A plan, its expanded tests and every completed
run are committed, each in one transaction, before the next step starts; a
run interrupted before its commit leaves nothing and is run again on resume.
The stop rule is a pure function of the committed runs, so `plan resume`
continues each unfinished test exactly where the killed controller was:
it re-runs the test's presetup (images and mounts are made again, as after
a reboot), then only the runs still missing.

Only one controller may write a store's plans at a time: a plan run or
resume holds an exclusive lock (flock on STORE.lock, released by the kernel
if the process dies), and a second one fails at once with a clear message.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import fsimage
from .. import store as store_module
from ..engine import Engine
from ..errors import InputError, RunError, TrialInterrupted
from ..locks import StoreLock
from ..sysinfo import snapshot
from ..targets import check_ours, parse_target, target_label
from ..trials import TrialFailed, TrialRecord, measured_so_far, run_trial
from . import cache, control, stoprule, trials
from .monitor import Monitor, device_of, monitor_metrics
from .plan import Plan, render
from .process import aggregate, run_together

COMMIT_DELAY_ENV = "PEAKBENCH_TEST_COMMIT_DELAY"  # tests only: seconds to sleep inside a run's commit


class PlanStopped(Exception):
    """Fast-fail: a run failed in a test whose on_failure is 'stop'."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------
# the lock


# ---------------------------------------------------------------------------------------------
# store records


def commit_run(store, **run) -> int:
    """One run (Store.insert_plan_run's fields), in one transaction: all of it is stored, or none. Its
    trial is already stored by then (trials.run_trial), so a trial a killed controller measured is kept
    even though its run is run again on resume."""
    with store.transaction():
        run_id = store.insert_plan_run(**run)
        delay = os.environ.get(COMMIT_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
    return run_id


# ---------------------------------------------------------------------------------------------
# helpers


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def _render_command(command, values: dict):
    if isinstance(command, str):
        return render(command, values)
    return [render(part, values) for part in command]


def cleanup_stale(directory: Path) -> list[str]:
    """Unmount whatever a killed controller left mounted under `directory` and detach its loop devices."""
    done = []
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return done
    root = os.path.realpath(directory)
    mount_points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                mount_points.append(point)
    for point in sorted(mount_points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=120)
        done.append(f"unmounted {point}")
    if shutil.which("losetup") and directory.is_dir():
        for image in directory.glob("*.img"):
            listed = subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True, timeout=60)
            for line in listed.stdout.splitlines():
                device = line.split(":", 1)[0]
                subprocess.run(["losetup", "-d", device], capture_output=True, timeout=60)
                done.append(f"detached {device}")
    return done


def _parse_metrics(test: dict, text: str) -> dict:
    metrics: dict[str, float] = {}
    if test.get("parse") == "json":
        found = None
        stripped = text.strip()
        candidates = [stripped] + [line.strip() for line in reversed(stripped.splitlines())]
        for candidate in candidates:
            if candidate.startswith("{"):
                try:
                    value = json.loads(candidate)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    found = value
                    break
        for key, value in (found or {}).items():
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                metrics[re.sub(r"\W", "_", key)] = float(value)
            elif isinstance(value, dict):
                for sub, number in value.items():
                    if isinstance(number, (int, float)) and not isinstance(number, bool):
                        metrics[re.sub(r"\W", "_", f"{key}_{sub}")] = float(number)
    for name, pattern in test.get("metrics", {}).items():
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if matches:
            match = matches[-1]
            group = match.group("value") if "value" in match.re.groupindex else match.group(1)
            try:
                metrics[name] = float(group)
            except (TypeError, ValueError):
                pass
    return metrics


# ---------------------------------------------------------------------------------------------
# the runner


class Runner:
    def __init__(self, store: store_module.Store, plan_id: int, out=None):
        self.store = store
        self.plan_id = plan_id
        self.out = out or sys.stderr  # looked up per call: a caller may have replaced sys.stderr since import
        row = store.plan(plan_id)
        self.plan = row["plan"]
        self.workdir = Path(row["workdir"])
        self.settings = self.plan["settings"]
        self.tests = store.plan_tests(plan_id)

    def say(self, message: str) -> None:
        print(message, file=self.out, flush=True)

    def run(self) -> str:
        """Run every unfinished test; returns the plan's final status ('done', 'failed' or 'stopped')."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        total = len(self.tests)
        flow = control.Flow(self.tests, self.store.plan_runs, self.settings["confidence"])
        failed_tests = 0
        interleaved: list[tuple[dict, dict]] = []  # (test, the row chosen to run) of an interleaved plan
        try:
            for test in self.tests:
                if test["status"] in ("done", "skipped"):
                    continue
                # A test that failed before (fast-fail, or on_failure = continue) is tried again on
                # resume: its failed runs stay stored but never count.
                try:
                    chosen, why = flow.choose(test)
                except control.ConditionError as error:
                    test["status"] = self._fail(test["settings"], test["id"], 0, f"its condition: {error}")
                    failed_tests += 1
                    continue
                if chosen is None:
                    self.store.update_plan_test(test["id"], status="skipped", stop_reason=why)
                    test["status"] = "skipped"
                    self.say(f"[{test['seq'] + 1}/{total}] {test['name']}: skipped ({why})")
                    continue
                if why:
                    self.store.add_plan_event(self.plan_id, test["id"], "branch", f"{test['name']}: {why}")
                if self.settings.get("interleave"):  # plan.py allows no condition there, so all choices stand
                    interleaved.append((test, chosen))
                    continue
                test["status"] = self.run_test(chosen, total)
                failed_tests += test["status"] == "failed"
            statuses = self.run_interleaved([chosen for _, chosen in interleaved], total)
            for (test, _), status in zip(interleaved, statuses):
                test["status"] = status
            failed_tests += statuses.count("failed")
        except PlanStopped as stop:
            self.store.update_plan(self.plan_id, status="failed", error=str(stop), finished=_now())
            self.say(f"plan {self.plan['name']}: stopped: {stop}")
            return "failed"
        final = "done" if failed_tests == 0 else "stopped"
        self.store.update_plan(
            self.plan_id,
            status=final,
            finished=_now(),
            error=None if final == "done" else f"{failed_tests} test(s) failed",
        )
        return final

    def run_interleaved(self, rows: list[dict], total: int) -> list[str]:
        """One run of each unfinished test in turn until each stops (the plan's `interleave`), so that
        tests compared with each other share the machine's drift rather than each having a stretch of it."""
        steps = [self.test_steps(row, total) for row in rows]
        statuses: list[str | None] = [None] * len(rows)
        try:
            while None in statuses:
                for index, step in enumerate(steps):
                    if statuses[index] is None:
                        try:
                            next(step)
                        except StopIteration as finished:
                            statuses[index] = finished.value
        finally:
            for step in steps:
                step.close()  # a stopped plan still tears down every test's file system
        return statuses

    # -- one test -------------------------------------------------------------------------------
    def run_test(self, row: dict, total: int) -> str:
        """Run one test until its stop rule decides; its status ('done' or 'failed')."""
        steps = self.test_steps(row, total)
        while True:
            try:
                next(steps)
            except StopIteration as finished:
                return finished.value

    def test_steps(self, row: dict, total: int):
        """One test as steps: set up, then yield after each run, then tear down; returns its status."""
        test = row["settings"]
        test_id = row["id"]
        label = f"[{test['seq'] + 1}/{total}] {test['name']}"
        runs = self.store.plan_runs(test_id)
        resumed = bool(runs) or row["status"] in ("running", "failed")
        decision = self._decision(test, runs)
        if decision:
            self.store.update_plan_test(test_id, status="done", stop_reason=decision)
            self.say(f"{label}: done ({decision})")
            return "done"
        test_dir = self.workdir / f"{test['seq']:04d}-{_safe(test['name'])}"
        for message in cleanup_stale(test_dir):
            self.store.add_plan_event(
                self.plan_id, test_id, "resume", f"{test['name']}: {message} (left by a killed run)"
            )
        test_dir.mkdir(parents=True, exist_ok=True)
        self.store.update_plan_test(test_id, status="running")
        if resumed:
            self.store.add_plan_event(
                self.plan_id, test_id, "resume", f"{test['name']}: resumed with {len(runs)} stored run(s)"
            )
        fs = None
        values = {
            "plan": self.plan["name"],
            "test": test["name"],
            "workdir": str(test_dir),
            "threads": test["threads"],
            "mount": str(test_dir / "mnt"),
            "run": 0,
            "thread": 1,
            "error": "",
            **test["vars"],
        }
        try:
            if test["fs"]:
                try:
                    fs = fsimage.create(test_dir, test["fs"]["type"], test["fs"]["size_mb"], test["fs"]["options"])
                except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                    return self._fail(test, test_id, 0, f"cannot make the {test['fs']['type']} image: {error}")
                values["mount"] = str(fs.mountpoint)
            sysinfo = self._sysinfo(test, values)
            self.store.update_plan_test(test_id, sysinfo=sysinfo)
            failure = self._hooks(test, test_id, "presetup", values, test_dir)
            if failure:
                return self._fail(test, test_id, 0, failure)
            warm_pending = "warm" in test["cache"]["policy"]
            while True:
                attempt = (runs[-1]["attempt"] if runs else 0) + 1
                values["run"] = attempt
                outcome = self._one_run(test, test_id, attempt, values, test_dir, fs, sysinfo, warm_pending)
                runs = self.store.plan_runs(test_id)
                last = runs[-1]
                if last["status"] != "done":
                    return self._fail(test, test_id, attempt, last["error"])
                discarded = bool(last["discarded"])
                warm_pending = False
                shown = last["metrics"].get(test["metric"])
                shown_text = f"{test['metric']} {shown:.6g}" if isinstance(shown, (int, float)) else ""
                self.say(f"{label} run {attempt}{' (warm-up, discarded)' if discarded else ''}: {shown_text}{outcome}")
                decision = self._decision(test, runs)
                if decision:
                    break
                yield
            failure = self._hooks(test, test_id, "postcleanup", values, test_dir)
            if failure:
                return self._fail(test, test_id, attempt, failure)
            self.store.update_plan_test(test_id, status="done", stop_reason=decision)
            self.say(f"{label}: done ({decision})")
            return "done"
        finally:
            if fs is not None:
                try:
                    fs.destroy()
                except Exception as error:  # noqa: BLE001 - reported, the plan goes on
                    self.store.add_plan_event(self.plan_id, test_id, "warning", f"{test['name']}: teardown: {error}")

    def _decision(self, test: dict, runs: list[dict]) -> str | None:
        counted = [r["metrics"] for r in runs if r["status"] == "done" and not r["discarded"]]
        elapsed = sum(float(r["metrics"].get("elapsed", 0.0)) for r in runs)
        failures = sum(1 for r in runs if r["status"] != "done")
        decision, warning = stoprule.decide(
            test["stop"],
            test["metric"],
            counted,
            attempts=len(runs),
            failures=failures,
            elapsed=elapsed,
            confidence=self.settings["confidence"],
        )
        if warning:
            self.say(f"warning: {test['name']}: {warning}")
        return decision

    def _sysinfo(self, test: dict, values: dict) -> dict:
        target_path = self._target_path(test, values)
        try:
            target = (
                {"kind": "posix", "path": target_path}
                if target_path and os.path.exists(target_path)
                else {"kind": "none"}
            )
            engine_version = None
            if test["kind"] == "trial":
                with contextlib.suppress(Exception):
                    engine_version = Engine().version()
            info = snapshot(target, engine_version)
        except Exception as error:  # noqa: BLE001 - a snapshot must never stop a plan
            info = {"error": str(error)}
        if test.get("server_version"):
            hook = test["server_version"]
            results = run_together(
                [_render_command(hook["command"], values)],
                shell=hook["shell"],
                envs=[self._env(test, values, 1)],
                timeout_s=hook["timeout_s"],
                output_dir=Path(values["workdir"]) / "out",
                label="server-version",
            )
            info["server_version"] = (results[0].stdout.strip() or results[0].stderr.strip())[:500]
        return info

    def _env(self, test: dict, values: dict, thread: int) -> dict:
        env = dict(os.environ)
        local = {**values, "thread": thread}
        for key, value in test["env"].items():
            env[key] = render(value, local)
        env.update(
            {
                "PEAKBENCH_THREAD": str(thread),
                "APTHREAD": str(thread),
                "PEAKBENCH_THREADS": str(test["threads"]),
                "PEAKBENCH_RUN": str(values["run"]),
                "PEAKBENCH_TEST": test["name"],
                "PEAKBENCH_PLAN": self.plan["name"],
                "PEAKBENCH_MOUNT": str(values["mount"]),
                "PEAKBENCH_WORKDIR": str(values["workdir"]),
            }
        )
        return env

    def _hooks(
        self, test: dict, test_id: int, phase: str, values: dict, test_dir: Path, collect: list | None = None
    ) -> str | None:
        """Run one phase's hooks in order; returns why a hook failed (None when all were fine)."""
        for number, hook in enumerate(test["hooks"][phase], start=1):
            command = _render_command(hook["command"], values)
            started = time.monotonic()
            try:
                result = run_together(
                    [command],
                    shell=hook["shell"],
                    envs=[self._env(test, values, 1)],
                    timeout_s=hook["timeout_s"],
                    output_dir=test_dir / "out",
                    label=f"{phase}{number}.run{values['run']}",
                )[0]
            except OSError as error:
                return f"{phase} hook {number} could not start: {error}"
            record = {
                "phase": phase,
                "number": number,
                "command": command,
                "exit_status": result.exit_status,
                "elapsed": time.monotonic() - started,
                "timed_out": result.timed_out,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "error": result.error,
            }
            if collect is not None:
                collect.append(record)
            else:
                self.store.add_plan_event(
                    self.plan_id,
                    test_id,
                    "hook",
                    f"{test['name']}: {phase} hook {number}: {'ok' if result.ok else result.describe_failure()}",
                    record,
                )
            if not result.ok and not hook["ignore_errors"]:
                return f"{phase} hook {number} ({_show(command)}) failed: {result.describe_failure()}"
        return None

    def _cache(self, test: dict, test_id: int, attempt: int, values: dict, fs) -> list[dict]:
        done = []
        policy = test["cache"]["policy"]
        if "reboot" in policy:
            done.append(self._reboot(test, test_id, attempt, values))
        if "remount" in policy:
            if fs is not None:
                os.sync()
                fs.remount()
                done.append({"policy": "remount", "mount_point": str(fs.mountpoint), "fs_type": fs.fstype})
            else:
                done.append(cache.remount_path(render(test["cache"]["mount"], values)))
        if "drop" in policy:
            done.append(cache.drop_caches())
        if "chill" in policy:
            done.append(cache.chill(test["cache"]["chill_bytes"]))
        return done

    def _one_run(
        self, test: dict, test_id: int, attempt: int, values: dict, test_dir: Path, fs, sysinfo: dict, discard: bool
    ) -> str:
        """Setup, cache policy, the measured run (with monitors), commit, cleanup. Returns a note to print."""
        hooks: list[dict] = []
        threads_out: list[dict] = []
        metrics: dict = {}
        trial_ids: list[int] = []
        monitor_record = None
        cache_done: list[dict] = []
        error = self._hooks(test, test_id, "setup", values, test_dir, collect=hooks)
        if error is None:
            try:
                cache_done = self._cache(test, test_id, attempt, values, fs)
            except (RunError, OSError, RuntimeError, subprocess.SubprocessError) as failure:
                error = f"cache policy: {failure}"
        if error is None:
            monitor = None
            if test["monitor"]["enabled"]:
                device_setting = render(test["monitor"]["device"], values)
                device = None
                if device_setting == "auto":
                    device = device_of(self._target_path(test, values))
                elif device_setting != "none":
                    device = os.path.basename(os.path.realpath(device_setting))
                monitor = Monitor(test["monitor"]["interval_s"], device, test["monitor"]["processes"])
                monitor.start()
            try:
                if test["kind"] == "trial":
                    metrics, threads_out, trial_ids, error = self._run_trial(test, values, attempt, sysinfo)
                else:  # a command, or a step that runs a peakbench command
                    metrics, threads_out, error = self._run_command(test, values, test_dir)
            finally:
                if monitor is not None:
                    summary = monitor.stop()
                    monitor_record = {"summary": summary, "series": monitor.series()}
                    if error is None:
                        metrics.update(monitor_metrics(summary))
        status = "done" if error is None else "failed"
        commit_run(
            self.store,
            plan_id=self.plan_id,
            test_id=test_id,
            attempt=attempt,
            status=status,
            discarded=discard and status == "done",
            metrics=metrics,
            threads=threads_out,
            hooks=hooks,
            cache=cache_done,
            monitor=monitor_record,
            sysinfo=sysinfo,
            result=None,  # a trial's result is its stored trial's (trial_ids)
            trial_ids=trial_ids,
            error=error,
        )
        if status == "done":
            cleanup_error = self._hooks(test, test_id, "cleanup", values, test_dir)
            if cleanup_error:
                self.store.add_plan_event(self.plan_id, test_id, "warning", f"{test['name']}: {cleanup_error}")
        return ""

    def _reboot(self, test: dict, test_id: int, attempt: int, values: dict) -> dict:
        """Checkpoint, then the reboot command; the run goes on after `plan resume`, from here."""
        events = [e for e in self.store.plan_events(self.plan_id) if e["kind"] == "reboot"]
        checkpoint = control.reboot_done(events, test_id, attempt)
        if checkpoint:
            return {
                "policy": "reboot",
                "resumed_after": checkpoint["at"],
                "booted": checkpoint["boot_id"] != control.boot_id(),
            }
        hook = test["cache"]["reboot"]
        command = _render_command(hook["command"], values)
        detail = {
            "test_id": test_id,
            "attempt": attempt,
            "boot_id": control.boot_id(),
            "at": _now(),
            "command": command,
        }
        self.store.add_plan_event(self.plan_id, test_id, "reboot", f"{test['name']}: run {attempt}: rebooting", detail)
        self.say(
            f"{test['name']} run {attempt}: rebooting ({_show(command)}); the plan goes on with"
            f" `peakbench plan resume --after-reboot --db {self.store.path}` when the machine is back"
        )
        result = run_together(
            [command],
            shell=hook["shell"],
            envs=[self._env(test, values, 1)],
            timeout_s=hook["timeout_s"],
            output_dir=Path(values["workdir"]) / "out",
            label=f"reboot.run{attempt}",
        )[0]
        if not result.ok:
            raise RunError(f"the reboot command failed: {result.describe_failure()}")
        time.sleep(hook["wait_s"])  # the machine goes down during this wait
        raise RunError(f"the reboot command returned, and the machine was still up {hook['wait_s']:g} s later")

    def _target_path(self, test: dict, values: dict) -> str | None:
        """The directory under test: a trial's target, a command test's `target`, else the fs image's mount."""
        written = test["trial"]["target"] if test["kind"] == "trial" else test.get("target")
        if written:
            rendered = render(written, values)
            if rendered.startswith("file://"):
                rendered = rendered[len("file://") :]
            return None if "://" in rendered else rendered
        return values["mount"] if test["fs"] else None

    def _step_command(self, test: dict, values: dict, test_dir: Path) -> list[str]:
        """`peakbench SEARCH|SURFACE|SFS|REPLAY ...` on this plan's store, its --json on standard output."""
        step = test["step"]
        surface_file = test_dir / "surface.json"
        if step["surface"] is not None:
            surface_file.write_text(json.dumps(step["surface"]))
        argv = _render_command(step["argv"], {**values, "surface_file": str(surface_file)})
        return [sys.executable, "-m", "peakbench.cli", *argv, "--db", str(self.store.path)] + (
            ["--json", "-"] if step["json"] else []
        )

    def _run_command(self, test: dict, values: dict, test_dir: Path) -> tuple[dict, list, str | None]:
        count = test["threads"]
        if test.get("step"):
            commands = [self._step_command(test, values, test_dir)]
        else:
            commands = [_render_command(test["command"], {**values, "thread": i}) for i in range(1, count + 1)]
        envs = [self._env(test, values, i) for i in range(1, count + 1)]
        results = run_together(
            commands,
            shell=test["shell"],
            envs=envs,
            timeout_s=test["timeout_s"],
            output_dir=test_dir / "out",
            label=f"run{values['run']}",
        )
        per_thread = []
        parsed_all = []
        for result in results:
            parsed = _parse_metrics(test, result.stdout)
            parsed_all.append(parsed)
            per_thread.append({**result.to_dict(), "metrics": parsed})
        metrics = aggregate(results)
        combined: dict[str, float] = {}
        for parsed in parsed_all:
            for key, value in parsed.items():
                combined[key] = combined.get(key, 0.0) + value  # threads' throughputs and counts add up
        metrics.update(combined)
        finished = test["step"]["done_statuses"] if test.get("step") else [0]
        failed = [r for r in results if r.error or r.timed_out or r.exit_status not in finished]
        error = None
        if failed:
            first = failed[0]
            error = (
                f"thread {first.index} of {count}: {first.describe_failure()}"
                if count > 1
                else first.describe_failure()
            )
        elif test["metric"] not in metrics:
            error = f"the output has no metric {test['metric']!r} (parsed: {', '.join(sorted(combined)) or 'none'})"
        return metrics, per_thread, error

    def _run_trial(self, test: dict, values: dict, attempt: int, sysinfo: dict):
        """One trial through the one trial path (trials.run_trial), so it is stored as `run` stores one:
        a failure as a failed trial, Ctrl-C as an interrupted one, a result the store refuses in a file
        beside it. (metrics, per-client figures, the stored trials' ids, why it failed or None)."""
        from ..workload import find_workload, trial_spec

        t = test["trial"]
        try:
            workload = find_workload(t["workload"])
            docroot = t.get("docroot")  # absent in plans stored before trial tests took http:// targets
            target = parse_target(render(t["target"], values), render(docroot, values) if docroot else None)
            spec = trial_spec(
                workload,
                target,
                rate=t["rate"],
                warmup_s=t["warmup_s"],
                runtime_s=t["runtime_s"],
                seed=t["seed"] + attempt - 1,
                scale=t["scale"],
                max_outstanding=t["max_outstanding"],
            )
            check_ours(target)
            clients = trials.LocalClients(test["threads"], shared_fileset=workload.cluster_fileset == "shared")
            clients.validate(spec)  # a shared file set with a mix that writes is refused here
        except InputError as error:
            return {}, [], [], f"trial input: {error}"
        record = TrialRecord(
            workload=workload.name,
            target=target_label(target),
            sysinfo=sysinfo,
            notes=(f"plan {self.plan_id} ({self.plan['name']}), test {test['name']}, run {attempt}",),
        )
        started = time.monotonic()
        try:
            stored = run_trial(spec, clients, self.store, record)
        except TrialFailed as failed:
            linked = [failed.trial_id] if failed.trial_id is not None else []
            return {"elapsed": time.monotonic() - started}, [], linked, str(failed)
        except TrialInterrupted as stop:
            kept = (
                f"stored as interrupted trial {stop.trial_id}"
                if stop.trial_id is not None
                else "written beside the store"
            )
            self.say(
                f"{test['name']} run {attempt}: interrupted after {measured_so_far(spec, stop.result)};"
                f" what it measured is {kept}"
            )
            raise
        if stored.trial_id is None:  # the run cannot be committed either; the trial is safe in its file
            raise RunError(f"{stored.store_error}; the trial was written to {stored.saved_to} instead")
        metrics = {"elapsed": time.monotonic() - started, **trials.trial_metrics(stored.result)}
        per_client = [
            {
                "index": i + 1,
                "rate": one["load"]["rate"],
                "max_outstanding": one["load"].get("max_outstanding"),
                "start_at_unix_s": one.get("start_at_unix_s"),
                **trials.trial_metrics(res),
            }
            for i, (one, res) in enumerate(zip(clients.last_specs, clients.last_results))
        ]
        return metrics, per_client, [stored.trial_id], None

    def _fail(self, test: dict, test_id: int, attempt: int, error: str) -> str:
        message = f"{test['name']}: {'run ' + str(attempt) if attempt else 'test'} failed: {error}"
        self.say(f"FAILED {message}")
        self.store.add_plan_event(self.plan_id, test_id, "failure", message, {"attempt": attempt, "error": error})
        self.store.update_plan_test(test_id, status="failed", stop_reason=f"failed: {error}"[:1000])
        self._notify(test, attempt, error)
        if test["on_failure"] == "stop":
            raise PlanStopped(message)
        return "failed"

    def _notify(self, test: dict, attempt: int, error: str) -> None:
        hook = self.settings.get("notify")
        if not hook:
            return
        values = {
            "plan": self.plan["name"],
            "test": test["name"],
            "run": attempt,
            "error": error,
            "thread": 1,
            "threads": test["threads"],
            "mount": "",
            "workdir": str(self.workdir),
        }
        command = _render_command(hook["command"], values)
        env = dict(
            os.environ,
            PEAKBENCH_PLAN=self.plan["name"],
            PEAKBENCH_TEST=test["name"],
            PEAKBENCH_ERROR=error,
            PEAKBENCH_RUN=str(attempt),
        )
        try:
            result = run_together(
                [command],
                shell=hook["shell"],
                envs=[env],
                timeout_s=hook["timeout_s"],
                output_dir=self.workdir / "notify",
                label=f"notify-{_safe(test['name'])}",
            )[0]
            outcome = "ok" if result.ok else result.describe_failure()
            detail = {
                "command": command,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "exit_status": result.exit_status,
            }
        except OSError as failure:
            outcome, detail = f"could not start: {failure}", {"command": command}
        self.store.add_plan_event(self.plan_id, None, "notify", f"notify for {test['name']}: {outcome}", detail)


def _show(command) -> str:
    return command if isinstance(command, str) else " ".join(command)


# ---------------------------------------------------------------------------------------------
# entry points


def default_workdir(db: Path) -> Path:
    return Path(str(Path(db).absolute()) + ".work")


def run_plan(plan: Plan, db: Path, workdir: Path | None = None, out=None) -> tuple[int, str]:
    """Store the plan and run it; returns (plan id, final status)."""
    out = out or sys.stderr
    store_module.check_compatible(db)
    lock = StoreLock(db)
    lock.acquire(f"running plan {plan.name}")
    try:
        with store_module.Store(db) as store:
            base = workdir or default_workdir(db)
            plan_id = store.add_plan(
                name=plan.name,
                path=plan.path,
                sources=plan.sources,
                plan=plan.to_dict(),
                workdir=str(base / f"plan{(store.last_plan_id() or 0) + 1}"),
                tests=plan.tests,
                notes=plan.notes,
            )
            print(
                f"plan {plan_id} ({plan.name}): {len(plan.tests)} tests; store {db};"
                f" resume with `peakbench plan resume --db {db}` if interrupted",
                file=out,
                flush=True,
            )
            for note in plan.notes:
                print(f"note: {note}", file=out)
            return plan_id, Runner(store, plan_id, out).run()
    finally:
        lock.release()


def unfinished_plan(store, plan_id: int | None) -> int:
    if plan_id is not None:
        row = store.plan(plan_id)
        if row is None:
            raise InputError(f"no plan {plan_id} in the store", file=store.path)
        if row["status"] == "done":
            raise InputError(f"plan {plan_id} is already done; nothing to resume", file=store.path)
        return plan_id
    plan_id = store.last_plan_id(unfinished=True)
    if plan_id is None:
        raise InputError("no unfinished plan in the store; nothing to resume", file=store.path)
    return plan_id


def waiting_for_reboot(db: Path, plan_id: int | None = None) -> bool:
    """Whether the newest unfinished plan (or `plan_id`) stopped at a reboot whose run is not stored yet."""
    if not Path(db).exists():
        return False
    with store_module.Store(db, readonly=True) as store:
        try:
            plan_id = unfinished_plan(store, plan_id)
        except InputError:
            return False
        events = [e for e in store.plan_events(plan_id) if e["kind"] == "reboot"]
        attempts = {
            (run["test_id"], run["attempt"]) for t in store.plan_tests(plan_id) for run in store.plan_runs(t["id"])
        }
    checkpoints = [json.loads(e["detail"]) if isinstance(e["detail"], str) else e["detail"] for e in events]
    return any((c["test_id"], c["attempt"]) not in attempts for c in checkpoints)


def resume_plan(db: Path, plan_id: int | None = None, out=None) -> tuple[int, str]:
    out = out or sys.stderr
    if not Path(db).exists():
        raise InputError("no such store", file=db)
    store_module.check_compatible(db)
    lock = StoreLock(db)
    lock.acquire("resuming a plan")
    try:
        with store_module.Store(db) as store:
            plan_id = unfinished_plan(store, plan_id)
            counts = store.plan_done_runs(plan_id)
            store.update_plan(plan_id, status="running", error=None, finished=None)
            store.add_plan_event(
                plan_id, None, "resume", f"resumed by pid {os.getpid()} with {counts} completed run(s)"
            )
            print(f"plan {plan_id}: resuming ({counts} completed runs kept)", file=out, flush=True)
            return plan_id, Runner(store, plan_id, out).run()
    finally:
        lock.release()
