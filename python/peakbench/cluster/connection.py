"""Reaching the load clients: a Dask LocalCluster of local worker processes, or an existing
Dask scheduler; naming its workers as load clients; refusing workers whose peakbench differs.

    with connect(clients=4) as cluster: ...                       # 4 local worker processes
    with connect(address="tcp://scheduler:8786") as cluster: ...  # every worker of that cluster
    with connect(address=..., clients=8) as cluster: ...          # wait for 8 and use those

Each Dask worker is one load client and runs one engine at a time. A client is
named client-0, client-1, ... in the order of its worker's address, so the
names are stable for one cluster. A scheduler that cannot be reached is one
line (RunError). Before anything runs, every worker is asked for its identity
(peakbench version, engine version, cluster protocol): any difference from the
controller's is refused here, before any load starts.

A tls:// scheduler is reached with the PEM files of --tls-ca-file, --tls-cert and --tls-key
(the options `dask scheduler` and `dask worker` take), set as Dask's own TLS configuration
for the process by use_tls(); Dask's configuration files and DASK_* variables work too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import logging
import os
import socket
import sys
import time
from pathlib import Path

from ..engine import Engine
from ..errors import InputError, RunError, import_extra

# Bumped whenever the functions the controller sends to workers change their contract.
PROTOCOL = 1
CONNECT_TIMEOUT_S = 10.0
# How long a poll of the workers alive waits for the scheduler before it counts as unanswered.
ALIVE_TIMEOUT_S = 10.0
# Identity fields that must agree between the controller and every worker.
MUST_MATCH = ("peakbench", "engine", "protocol")


# The controller's TLS options and the Dask settings they fill.
TLS_SETTINGS = {
    "tls_ca_file": ("--tls-ca-file", "distributed.comm.tls.ca-file"),
    "tls_cert": ("--tls-cert", "distributed.comm.tls.client.cert"),
    "tls_key": ("--tls-key", "distributed.comm.tls.client.key"),
}


@dataclasses.dataclass(frozen=True)
class LoadClient:
    name: str  # client-0, client-1, ...
    worker: str  # the Dask worker's address
    host: str  # the worker's host name
    pid: int


def peakbench_version() -> str:
    try:
        return importlib.metadata.version("peakbench")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def identity() -> dict:
    """What a process runs: compared between the controller and each worker (runs on workers too)."""
    try:
        engine = Engine().version().removeprefix("peakbench-engine ").strip() or "unknown"
    except (RunError, OSError) as error:
        engine = f"missing ({error})"
    return {
        "peakbench": peakbench_version(),
        "engine": engine,
        "protocol": PROTOCOL,
        "python": ".".join(map(str, sys.version_info[:3])),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def version_mismatches(controller: dict, workers: dict[str, dict]) -> list[str]:
    """One line per worker whose identity differs from the controller's in a field that must match."""
    problems = []
    for address, found in sorted(workers.items()):
        if isinstance(found, BaseException):
            problems.append(
                f"worker {address} could not run peakbench ({type(found).__name__}: {found});"
                f" install the same peakbench on every worker"
            )
            continue
        differ = [
            f"{key} {found.get(key)} (controller {controller[key]})"
            for key in MUST_MATCH
            if found.get(key) != controller[key]
        ]
        if differ:
            problems.append(f"worker {address} on {found.get('host')} has " + ", ".join(differ))
    return problems


class LoadCluster:
    """A connected Dask client and the load clients it offers. Close it (or use `with`)."""

    def __init__(self, client, clients: list[LoadClient], local=None, identities: dict | None = None):
        self.client = client
        self.clients = clients
        self.local = local  # the LocalCluster we started, closed with us
        self.identities = identities or {}

    @property
    def size(self) -> int:
        return len(self.clients)

    def alive(self) -> set[str] | None:
        """Addresses of the workers the scheduler knows now; None if it did not answer in time."""
        try:
            return known_workers(self.client, ALIVE_TIMEOUT_S)
        except OSError:  # TimeoutError too
            return None

    def describe(self) -> str:
        hosts = sorted({c.host for c in self.clients})
        kind = "local worker processes" if self.local is not None else f"workers of {self.client.scheduler.address}"
        return f"{self.size} load clients ({kind}) on {', '.join(hosts)}"

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self.local is not None:
                self.local.close()

    def __enter__(self) -> LoadCluster:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


@contextlib.contextmanager
def _main_module_hidden():
    """Spawned worker processes re-import the controller's __main__ (multiprocessing's spawn
    does, to find functions defined there). For `python -m peakbench.cli` that is the whole
    CLI with scipy, seconds per worker on two cores; the workers only run
    functions of peakbench.cluster, so they are started without it."""
    main = sys.modules.get("__main__")
    saved = {key: getattr(main, key) for key in ("__spec__", "__file__") if hasattr(main, key)}
    try:
        for key in saved:
            setattr(main, key, None)
        yield
    finally:
        for key, value in saved.items():
            setattr(main, key, value)


def _quiet_dask() -> None:
    # A closing cluster logs connection resets and heartbeats at WARNING; the user needs none of it.
    for name in (
        "distributed",
        "distributed.nanny",
        "distributed.scheduler",
        "distributed.worker",
        "distributed.core",
        "distributed.comm",
        "distributed.client",
        "distributed.batched",
    ):
        logging.getLogger(name).setLevel(logging.ERROR)


def connect(
    clients: int | None = None,
    address: str | None = None,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    check_versions: bool = True,
    worker_env: dict | None = None,
) -> LoadCluster:
    """A LocalCluster of `clients` worker processes, or the workers of the scheduler at `address`."""
    if clients is None and address is None:
        raise InputError("give a number of clients or a scheduler address", field="--clients")
    if clients is not None and clients < 1:
        raise InputError(f"must be at least 1 (got {clients})", field="--clients")
    dask = import_extra("dask", "cluster", "--cluster" if address else "--clients")
    distributed = import_extra("distributed", "cluster", "--cluster" if address else "--clients")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster

    _quiet_dask()
    local = None
    with dask.config.set(
        {"distributed.scheduler.allowed-failures": 0, "distributed.comm.timeouts.connect": f"{timeout_s}s"}
    ):
        if address is None:
            with _main_module_hidden():
                local = LocalCluster(
                    n_workers=clients,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                    env=worker_env or {},
                )
            client = Client(local, timeout=timeout_s)
        else:
            client = _reach(address, timeout_s)
    try:
        wanted = clients or 1
        try:
            client.wait_for_workers(wanted, timeout=max(timeout_s, 60.0 if local is not None else timeout_s))
        except (TimeoutError, OSError) as error:
            have = len(known_workers(client, timeout_s))
            raise RunError(f"the Dask cluster has {have} workers, {wanted} wanted ({type(error).__name__})") from None
        workers = sorted(known_workers(client, timeout_s))
        if clients is not None:
            workers = workers[:clients]
        found = client.run(identity, workers=workers, on_error="return")
        if check_versions:
            problems = version_mismatches(identity(), found)
            if problems:
                raise RunError("refused before any load started: " + "; ".join(problems))
        load_clients = [
            LoadClient(
                f"client-{i}",
                address_,
                _field(found.get(address_), "host", address_),
                _field(found.get(address_), "pid", 0),
            )
            for i, address_ in enumerate(workers)
        ]
        return LoadCluster(client, load_clients, local, found)
    except BaseException:
        client.close()
        if local is not None:
            local.close()
        raise


def add_tls_options(parser) -> None:
    """--tls-ca-file, --tls-cert and --tls-key on a command that takes --cluster."""
    helps = {
        "tls_ca_file": "the CA certificate (PEM) that signed the scheduler's certificate, for a tls:// --cluster",
        "tls_cert": "this controller's certificate (PEM) for a tls:// --cluster",
        "tls_key": "the private key (PEM) of --tls-cert",
    }
    for dest, (option, _) in TLS_SETTINGS.items():
        parser.add_argument(option, dest=dest, type=Path, metavar="FILE", help=helps[dest])


def tls_files(values: dict) -> dict[str, Path | None]:
    """The TLS files among a command's option values (or a stored invocation), by TLS_SETTINGS' keys."""
    return {dest: values.get(dest) for dest in TLS_SETTINGS}


def cluster_invocation(args) -> dict:
    """How a job reached its load clients, stored so that `peakbench resume` reaches them again."""
    tls = {dest: str(Path(path).absolute()) for dest, path in tls_files(vars(args)).items() if path is not None}
    return {"clients": args.clients, "cluster": args.cluster, "clock_tolerance_ms": args.clock_tolerance, **tls}


def use_tls(address: str | None, files: dict[str, Path | None]) -> None:
    """Reach the scheduler at a tls:// `address` with `files` (TLS_SETTINGS' keys to PEM paths) from now
    on in this process, encrypted only. Files given without a tls:// address, or only some of the
    three, or one that is not there, are refused before anything runs."""
    given = {dest: path for dest, path in files.items() if path is not None}
    if not given:
        return
    options = {dest: option for dest, (option, _) in TLS_SETTINGS.items()}
    first = options[next(iter(given))]
    if not (address or "").startswith("tls://"):
        raise InputError(f"applies to a tls:// --cluster address (got {address or 'none'})", field=first)
    missing = [options[dest] for dest in TLS_SETTINGS if dest not in given]
    if missing:
        raise InputError(f"TLS needs {', '.join(missing)} as well", field=missing[0])
    for dest, path in given.items():
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file", field=options[dest])
    dask = import_extra("dask", "cluster", "--cluster")
    settings = {key: str(Path(given[dest]).absolute()) for dest, (_, key) in TLS_SETTINGS.items()}
    dask.config.set({**settings, "distributed.comm.require-encryption": True})


def known_workers(client, timeout_s: float) -> set[str]:
    """The addresses of the workers the scheduler knows, asked now. Not Client.scheduler_info(): when its
    request fails (a timeout on a loaded machine) it silently returns the client's cached identity, which
    the client's own periodic refresh stores without workers, so every worker would look gone."""
    return set(client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=timeout_s)["workers"])


def _field(found, key: str, default):
    return found.get(key, default) if isinstance(found, dict) else default


def _reach(address: str, timeout_s: float):
    from distributed import Client

    if "://" not in address:
        address = f"tcp://{address}"
    if address.startswith("tls://") and not import_extra("dask", "cluster", "--cluster").config.get(
        "distributed.comm.tls.ca-file", None
    ):
        raise InputError(
            f"{address}: a tls:// scheduler needs --tls-ca-file, --tls-cert and --tls-key", field="--cluster"
        )
    started = time.monotonic()
    try:
        return Client(address, timeout=timeout_s)
    except (OSError, TimeoutError) as error:
        waited = time.monotonic() - started
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        if len(reason) > 160:
            reason = reason[:157] + "..."
        raise RunError(
            f"cannot reach the Dask scheduler at {address} (gave up after {waited:.0f} s: {reason})"
        ) from None
    except ValueError as error:
        raise InputError(f"{address}: not a scheduler address ({error})", field="--cluster") from None
