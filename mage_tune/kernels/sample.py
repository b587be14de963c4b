"""A seeded sample of a space that still touches every value of every knob."""

from __future__ import annotations

import random

from mage_tune.kernels.base import Config, Family, Shape


def sample_configs(family: Family, shape: Shape, arch: str, count: int, seed: int = 0) -> list[Config]:
    valid = list(family.configs(shape, arch))
    if len(valid) <= count:
        return valid
    rng = random.Random(seed)
    chosen = rng.sample(valid, count)
    seen = {(k, c[k]) for c in chosen for k in c}
    for knob in family.knobs:
        for value in knob.domain:
            if (knob.name, value) in seen:
                continue
            having = [c for c in valid if c[knob.name] == value]
            if having:  # a value no valid config can take stays out: the constraints exclude it
                pick = rng.choice(having)
                chosen.append(pick)
                seen |= {(k, pick[k]) for k in pick}
    return chosen
