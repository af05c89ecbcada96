"""How long the guided policy's careful trials run at a load: chosen from the variance seen so far.

A trial's R̄ varies less the longer it runs: its squared coefficient of
variation falls about as 1/runlength, so cv²·runlength (the load's
"variance-seconds") carries over from one runlength to another. The model
ignores a floor of variation that no runlength removes, which makes it
predict more variation for a shorter trial than there is: it errs towards
longer trials.

Stein's procedure needs `pilot` trials at a load whatever the noise, and a
trial costs its warm-up plus its runlength, so the cheapest runlength is the
shortest whose predicted cv lets the pilot alone reach the accuracy:
cv² = pilot·(h/t)², h = 1 − a, t on pilot − 1 degrees of freedom. The search
starts at the shortest allowed runlength (settings.min_runlength) and
lengthens it, up to settings.runlength_s, once loads show that short trials
would need more than the pilot. Variation grows towards saturation, so the
noisiest load seen so far sets the runlength.

Every load's trials share one runlength chosen before they start, so each
load's interval remains an exact Stein interval.
"""

from __future__ import annotations

from collections.abc import Iterable

from .settings import SearchSettings
from .statistics import t_quantile


def careful_runlength(settings: SearchSettings, variance_seconds: Iterable[float], pilot: int) -> float:
    """The runlength of the careful trials at the next load.

    `variance_seconds`: cv² of a trial's R̄ times its runlength, one per load
    measured carefully so far (loads with at least two careful trials).
    """
    observed = max(variance_seconds, default=0.0)
    target_cv2 = pilot * ((1 - settings.accuracy) / t_quantile(settings.confidence, pilot - 1)) ** 2
    return min(max(observed / target_cv2, settings.min_runlength), settings.runlength_s)
