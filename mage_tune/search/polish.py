"""The end of a search: one-knob neighbours of the best few configs, tried before the sampler draws again.

A sampler such as TPE draws each knob on its own, so a search can end with a config one knob away from one of its best
left untried (at 16384 × 2560 on an H200 a 100-trial layer-norm search never ran vec=8 on its second and third best, 256
threads at vec=4, which a later crossing timed 1.5 % faster than its winner in the same run:
records/h200-2026-12-01-x-hints-threads.tar.xz). In its last `polish` trials a search enqueues such neighbours: each
other value of each knob on each of the BASES best distinct configs so far, repaired to its nearest valid config where
that value breaks a constraint (the changed knob kept), and not tried yet. They are ranked by the tuning database's
model where there is one (tuning/learned.py: knobs and launch, no compile) and by what the search has measured of each
changed value (a value only ever seen slow is tried last), ties in a seeded random order; a new best re-centres the
neighbourhood, and once every neighbour has run the sampler draws again.
"""

from __future__ import annotations

import math
import random

from mage_tune.kernels.base import Config
from mage_tune.kernels.neighbours import Neighbour, config_key
from mage_tune.problem import Problem
from mage_tune.tuning import learned

BASES = 3  # the best distinct configs whose neighbours are tried


def tried_keys(trials) -> set[str]:
    """The config keys an Optuna study's trials have taken: each one's params (a drawn trial's settled config, an
    enqueued one's given params) and, once run, what it ran as."""
    keys = {config_key(t.params) for t in trials}
    return keys | {config_key(t.user_attrs["config"]) for t in trials if "config" in t.user_attrs}


def ranked(
    problem: Problem,
    found: list[Neighbour],
    model,
    seed: int | None,
    measured: list[tuple[Config, float]] = (),
) -> list[Neighbour]:
    """`found`, the likeliest fastest first: by the model's log time (relative to its run) plus what this search has
    measured of the neighbour's changed value, log(the best time with that value / the best time): 0 for a value
    not measured yet, so a value the search has only seen slow is tried last. Ties (every score without a model and
    measurements) in a seeded random order: knob order would spend the trials on the first knobs only."""
    order = list(found)
    random.Random(seed).shuffle(order)
    scores = [0.0] * len(order)
    if model is not None:
        scores = model.predict([learned.features(problem, n.config, None) for n in order])
    best = min((value for _, value in measured), default=None)
    if best:
        for i, n in enumerate(order):
            with_value = [value for config, value in measured if config.get(n.knob) == n.value]
            if with_value:
                scores[i] += math.log(min(with_value) / best)
    return [n for _, n in sorted(zip(scores, order, strict=True), key=lambda pair: pair[0])]


def default_trials(trials: int, sampler: str) -> int:
    """A quarter of the trials, none for the grid (which walks every point anyway) or a search under 8 trials."""
    return 0 if sampler == "grid" or trials < 8 else trials // 4
