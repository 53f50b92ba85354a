"""Conditional writes that lost a race: a short random pause before the next attempt."""

from __future__ import annotations

import random
import time

BACK_OFF_S = 0.0005  # the longest first pause; it doubles with each attempt
BACK_OFF_CAP_S = 0.02


def back_off(attempt: int) -> None:
    """A random pause after the `attempt`-th lost race (0 for the first), growing with each one.
    Without it two writers fall into step: the winner commits and reads again while the loser is
    still reading. In the racing-writers contract test one writer lost 20 times in a row in 1 of 6
    runs; with it, 0 of 900 runs."""
    time.sleep(random.uniform(0, min(BACK_OFF_CAP_S, BACK_OFF_S * 2 ** attempt)))
