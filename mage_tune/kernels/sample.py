"""A seeded sample of a space that still touches every value of every knob, drawn without listing the space:
only the valid combinations of the constrained knobs are kept (free knobs multiply them by their product)."""

from __future__ import annotations

import itertools
import random

from mage_tune.arch import Arch
from mage_tune.kernels.base import Config, Family, Shape


def sample_configs(
    family: Family, shape: Shape, arch: Arch, count: int, seed: int = 0, cover: bool = True
) -> list[Config]:
    """`count` distinct valid configs (all of them when the space is no larger) and, with `cover`, one more for each
    knob value no draw took where a valid config can take it."""
    combos = list(family.bound_combinations(shape, arch))
    frees = list(itertools.product(*(k.domain for k in family.knobs if k.free)))
    total = len(combos) * len(frees)
    if total <= count:
        return list(family.configs(shape, arch))
    rng = random.Random(seed)
    chosen = [
        family.join_combination(combos[i // len(frees)], frees[i % len(frees)]) for i in rng.sample(range(total), count)
    ]
    if not cover:
        return chosen
    seen = {(k, c[k]) for c in chosen for k in c}
    bound = [k.name for k in family.knobs if not k.free]
    free = [k.name for k in family.knobs if k.free]
    for knob in family.knobs:
        for value in knob.domain:
            if (knob.name, value) in seen:
                continue
            if knob.free:
                having_combos = combos
                having_frees = [f for f in frees if f[free.index(knob.name)] == value]
            else:
                having_combos = [c for c in combos if c[bound.index(knob.name)] == value]
                having_frees = frees
            if having_combos:  # a value no valid config can take stays out: the constraints exclude it
                pick = family.join_combination(rng.choice(having_combos), rng.choice(having_frees))
                chosen.append(pick)
                seen |= {(k, pick[k]) for k in pick}
    return chosen
