"""The harness: whole experiments from a plan file, run unattended and crash-safely.

    plan.py      TOML plans: validation with file:line errors, vars, env, loops, when, includes,
                 defaults; expansion into test instances (plain dicts, stored with the plan)
    tomlpos.py   key path -> line of a TOML text (tomllib keeps no positions)
    expr.py      the small safe expression language of `when` and stop predicates
    runner.py    running and resuming plans: hooks, cache policies, monitors, commits, lock, notify
    process.py   commands behind a barrier, timed with wait4 (Auto-pilot's EXEC and THREADS)
    trials.py    LocalClients: the engine a plan's trial runs through peakbench.trials.run_trial,
                 split and started as the cluster does (cluster/fanout.py), merged as it merges
    stoprule.py  the stop decision, a pure function of the stored runs
    monitor.py   /proc sampling during a run (CPU, memory, the target's disk, named processes)
    cache.py     drop caches, remount, chill
    report.py    plan_analysis(store, plan_id): plain data for any report (getstats rows, warnings)
    commands.py  `peakbench plan ...` and `peakbench compare`
    postmark.py  a small Postmark-like mail workload to benchmark file systems with

Statistics live in peakbench.analysis (pure functions over lists of numbers).
Stored results: tables plans, plan_tests, plan_runs, plan_events (store.py, schema version 3).
"""
