"""How long the guided policy's careful trials run at a load: chosen from the variance seen so far.

A trial's R̄ varies less the longer it runs: the variance of its log (about
its squared coefficient of variation) falls about as 1/runlength, so
s²·runlength (the load's "variance-seconds") carries over from one runlength
to another. The model
ignores a floor of variation that no runlength removes, which makes it
predict more variation for a shorter trial than there is: it errs towards
longer trials.

Stein's procedure needs `pilot` trials at a load whatever the noise, and a
trial costs its warm-up plus its runlength, so the cheapest runlength is the
shortest whose predicted log deviation s lets the pilot alone reach the
accuracy: t·√(s²/p + s⁴/(2(p−1))) = atanh(1 − a) for a pilot of p, t on
p − 1 degrees of freedom (statistics.stein_trials). The search
starts at the shortest allowed runlength (settings.min_runlength) and
lengthens it, up to settings.runlength_s, once loads show that short trials
would need more than the pilot. Variation grows towards saturation, so the
noisiest load seen so far sets the runlength.

Every load's trials share one runlength chosen before they start, so each
load's interval remains an exact Stein interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .settings import SearchSettings
from .statistics import t_quantile


def careful_runlength(settings: SearchSettings, variance_seconds: Iterable[float], pilot: int) -> float:
    """The runlength of the careful trials at the next load.

    `variance_seconds`: the variance of log R̄ of a trial times its runlength,
    one per load measured carefully so far (loads with at least two careful trials).
    """
    observed = max(variance_seconds, default=0.0)
    allowed = (math.atanh(1 - settings.accuracy) / t_quantile(settings.confidence, pilot - 1)) ** 2
    # s² solving s²/p + s⁴/(2(p−1)) = allowed
    target_variance = (pilot - 1) * (math.sqrt(1 / pilot**2 + 2 * allowed / (pilot - 1)) - 1 / pilot)
    return min(max(observed / target_variance, settings.min_runlength), settings.runlength_s)
