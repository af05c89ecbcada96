"""Many load clients on Dask distributed: one trial across clients, merged exactly.

    connection.py  connect(clients=N | address="tcp://scheduler:8786") -> LoadCluster; version check
    clock.py       clock offsets of the clients against the controller; start-skew refusal
    fanout.py      DistributedEngine: the seam (Engine's interface over every client), DistributedTrial
    merge.py       merge_results: TrialResults of many clients -> one (pure)
    pool.py        a pool of independent servers: a surface's samples in parallel, one per server
    report.py      the per-client table printed under a merged trial

Dask is imported only when a cluster is used, so single-engine runs do not pay for it.

The one seam for every command (run, search, sfs, plans):

    with engine_for(clients=args.clients, address=args.cluster,
                    shared_fileset=workload.cluster_fileset == "shared") as engine:
        engine.prepare(spec)          # Engine() when neither is given, else a DistributedEngine
        result = engine.run(spec)     # merged TrialResult; raises ClientsLost (a RunError) if a
                                      # client was lost, with .trial holding the others' results

`DistributedEngine.run_trial(spec)` returns a DistributedTrial (merged result,
per-client runs, verdict) without raising for a lost client. See fanout.py.
"""

from .clock import ClockOffset, check_skew, measure_offsets
from .connection import LoadClient, LoadCluster, connect
from .fanout import (
    COMPLETE,
    FAILED,
    LOST,
    ClientRun,
    ClientsLost,
    DistributedEngine,
    DistributedTrial,
    client_specs,
    engine_for,
)
from .merge import merge_results

__all__ = [
    "COMPLETE",
    "FAILED",
    "LOST",
    "ClientRun",
    "ClientsLost",
    "ClockOffset",
    "DistributedEngine",
    "DistributedTrial",
    "LoadClient",
    "engine_for",
    "LoadCluster",
    "check_skew",
    "client_specs",
    "connect",
    "map_surface_on_pool",
    "measure_offsets",
    "merge_results",
    "PoolResult",
]


def __getattr__(name: str):
    # The pool needs the controller (scipy): imported on use, so that workers,
    # which import this package to run an engine, start in a fraction of a second.
    if name in ("PoolResult", "map_surface_on_pool"):
        from . import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
