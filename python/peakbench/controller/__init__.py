"""The workbench controller: peak-rate search to a stated confidence and accuracy, and response surfaces.

Pure logic over a `run_trial(load, runlength_s) -> Observation` callable, so it
runs unchanged against the simulator (peakbench.sim) and against real targets.
"""

from .observation import Observation, saturation_signal
from .policies import DEFAULT_POLICY, POLICIES
from .result import VERDICTS, SearchResult
from .search import find_peak
from .settings import SearchSettings
from .sweep import saturated, sweep_knee

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "VERDICTS",
    "Observation",
    "SearchResult",
    "SearchSettings",
    "find_peak",
    "saturated",
    "saturation_signal",
    "sweep_knee",
]
