"""The posix target's ops from its sender threads, which keep a descriptor table of their own."""

from peakbench.engine import Engine
from peakbench.workload import find_workload, trial_spec


def test_setattr_succeeds_from_a_sender_with_its_own_descriptor_table(engine_path, tmp_path):
    # With unshare(CLONE_FILES) in each sender, glibc's fchmodat(AT_SYMLINK_NOFOLLOW), emulated through
    # /proc/self/fd (the process's table), failed every setattr with EOPNOTSUPP: the mail workload
    # achieved 189.5 of 200 ops/s, and a Dask cluster test caught it.
    spec = trial_spec(
        find_workload("mail"), {"kind": "posix", "path": str(tmp_path)}, rate=200.0, warmup_s=0.2, runtime_s=1.0
    )
    engine = Engine(engine_path)
    engine.prepare(spec)
    setattr_op = engine.run(spec)["ops"]["setattr"]
    assert setattr_op["count"] > 0 and setattr_op["successes"] == setattr_op["count"], setattr_op
