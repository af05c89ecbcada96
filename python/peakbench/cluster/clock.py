"""Clock sanity: each load client's clock offset against the controller's, and the start skew it allows.

An offset is measured like NTP does: the controller notes its clock before (t0)
and after (t1) asking the worker for its clock (tw); the worker read its clock
somewhere in between, so offset = tw − (t0 + t1)/2 is wrong by at most
(t1 − t0)/2, the measurement's uncertainty. Of several rounds the one with the
shortest round trip wins: at least 3 rounds, more (up to 30) while the best is not
yet a quarter of the tolerance, since a busy host or scheduler delays some
round trips by milliseconds.

The controller starts every client at one instant of its own clock, handed to
each client in that client's clock (instant + offset; an offset within its own
uncertainty of zero is taken as zero, so clients that share the controller's
clock are not skewed by measurement noise): the start is then skewed
by at most the sum of the two largest uncertainties. Without compensation
(compensate=False, for clients that must be started on their own clock) the
skew is the spread of the offsets, widened by the uncertainties. A start whose
skew could exceed the tolerance is refused (RunError) before any load starts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from ..errors import RunError

MIN_ROUNDS, MAX_ROUNDS = 3, 30
DEFAULT_TOLERANCE_S = 0.010


@dataclasses.dataclass(frozen=True)
class ClockOffset:
    client: str
    offset_s: float  # client clock − controller clock
    uncertainty_s: float  # half the round trip of the best measurement

    @property
    def correction_s(self) -> float:
        """What the start compensates: the offset, unless it is within its own uncertainty of zero
        (clients sharing the controller's clock would otherwise be skewed by measurement noise)."""
        return self.offset_s if abs(self.offset_s) > self.uncertainty_s else 0.0

    def to_dict(self) -> dict:
        return {
            "offset_ms": self.offset_s * 1e3,
            "uncertainty_ms": self.uncertainty_s * 1e3,
            "corrected_ms": self.correction_s * 1e3,
        }


def worker_clock() -> float:
    """Runs on a worker: its wall clock, seconds since the epoch."""
    return time.time()


def estimate(client: str, samples: Sequence[tuple[float, float, float]]) -> ClockOffset:
    """The offset from (t0, worker time, t1) rounds: the round with the shortest round trip."""
    if not samples:
        raise ValueError("no clock samples")
    t0, tw, t1 = min(samples, key=lambda s: s[2] - s[0])
    if t1 < t0:
        raise ValueError("the controller's clock went backwards during a measurement")
    return ClockOffset(client, tw - (t0 + t1) / 2, (t1 - t0) / 2)


def skew_bound_s(offsets: Sequence[ClockOffset], compensate: bool = True) -> float:
    """The largest start skew between two clients that these measurements allow."""
    if len(offsets) < 2:
        return offsets[0].uncertainty_s if offsets else 0.0
    if compensate:
        widest = sorted((o.uncertainty_s for o in offsets), reverse=True)
        return widest[0] + widest[1]
    return max(o.offset_s + o.uncertainty_s for o in offsets) - min(o.offset_s - o.uncertainty_s for o in offsets)


def check_skew(offsets: Sequence[ClockOffset], tolerance_s: float, compensate: bool = True) -> float:
    """The skew bound, or RunError naming the clients to blame when it exceeds the tolerance."""
    bound = skew_bound_s(offsets, compensate)
    if bound <= tolerance_s:
        return bound
    if compensate:
        worst = sorted(offsets, key=lambda o: -o.uncertainty_s)[:2]
        detail = ", ".join(f"{o.client} ±{o.uncertainty_s * 1e3:.1f} ms" for o in worst)
        why = f"its clock offsets could only be measured to {detail} (slow round trips)"
    else:
        worst = sorted(offsets, key=lambda o: -abs(o.offset_s))[:2]
        detail = ", ".join(f"{o.client} {o.offset_s * 1e3:+.1f} ms" for o in worst)
        why = f"the clients' clocks disagree ({detail} against the controller's)"
    raise RunError(
        f"refused: a start skewed by up to {bound * 1e3:.1f} ms, beyond the tolerance of"
        f" {tolerance_s * 1e3:g} ms: {why}"
    )


def measure_offsets(
    cluster,
    clock: Callable[[], float] = worker_clock,
    now: Callable[[], float] = time.time,
    good_enough_s: float = DEFAULT_TOLERANCE_S / 4,
) -> list[ClockOffset]:
    """Each load client's offset (in client order). `clock` runs on the workers (tests pass a skewed one)."""
    offsets = []
    for load_client in cluster.clients:
        samples: list[tuple[float, float, float]] = []
        while len(samples) < MIN_ROUNDS or (
            len(samples) < MAX_ROUNDS and estimate(load_client.name, samples).uncertainty_s > good_enough_s
        ):
            t0 = now()
            answers = cluster.client.run(clock, workers=[load_client.worker])
            t1 = now()
            if load_client.worker not in answers:
                raise RunError(f"{load_client.name} ({load_client.worker}) did not answer the clock check")
            samples.append((t0, answers[load_client.worker], t1))
        offsets.append(estimate(load_client.name, samples))
    return offsets
