"""A small space's valid configs, listed once per search: what lets a search hand a trial a config it has not tried
when the sampler (and the redraw of a tried draw as a neighbour) keeps returning tried ones, and know when it has
tried them all.

Listing checks the constraints once per combination of the constrained knobs' values (free knobs multiply the count
without being checked), so it is done only where there are at most ENUMERABLE such combinations: about 0.2 s for a
layer norm, 0.8 s for a matmul at the cap. The built-in families' spaces (1-2 million combinations) are never listed;
their searches end by --trials or by the run of duplicates the loop allows (runner.py).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from mage_tune.kernels.base import Config, Family, Shape
from mage_tune.kernels.neighbours import config_key

ENUMERABLE = 200_000  # the most combinations of the constrained knobs' values a search checks to list its space


@dataclass(frozen=True)
class Space:
    """The valid configs of a family at one shape and arch, indexable without building them all: each valid tuple of
    the constrained knobs times every combination of the free knobs' values."""

    family: Family
    shape: Shape
    arch: str
    bound: tuple[tuple, ...]  # the valid value tuples of the constrained knobs, in knob order
    free: tuple[tuple, ...]  # the free knobs' domains, in knob order

    @classmethod
    def listed(cls, family: Family, shape: Shape, arch: str, cap: int | None = None) -> Space | None:
        """The space, or None where its constrained knobs have more than `cap` (ENUMERABLE) combinations: never
        listed."""
        if math.prod(len(k.domain) for k in family.knobs if not k.free) > (ENUMERABLE if cap is None else cap):
            return None
        bound = tuple(family.bound_combinations(shape, arch))
        return cls(family, dict(shape), arch, bound, tuple(tuple(k.domain) for k in family.knobs if k.free))

    @property
    def size(self) -> int:
        """How many configs are valid (Family.count_configs, without checking the constraints again)."""
        return len(self.bound) * math.prod(len(d) for d in self.free)

    def config(self, index: int) -> Config:
        """The config at `index` (0 <= index < size): its constrained tuple, then the free knobs' values."""
        per_bound = math.prod(len(d) for d in self.free)
        bound, rest = divmod(index, per_bound)
        values = []
        for domain in reversed(self.free):
            rest, i = divmod(rest, len(domain))
            values.append(domain[i])
        return self.family.join_combination(self.bound[bound], tuple(reversed(values)))

    def member(self, config: dict) -> bool:
        """Whether `config` (a record's, say) is one of the space's: every knob set to a value of its domain, none
        more, and no constraint broken."""
        knobs = self.family.knobs
        if set(config) != {k.name for k in knobs} or any(config[k.name] not in k.domain for k in knobs):
            return False
        return not self.family.violations(config, self.shape, self.arch)

    def untried(self, excluded: set[str], seed: str) -> Config | None:
        """A valid config whose key is not in `excluded`, from a seeded random place in the space; None when there is
        none. Walks at most len(excluded) + 1 configs: never the whole space."""
        size = self.size
        if not size:
            return None
        start = random.Random(seed).randrange(size)
        for step in itertools.islice(itertools.count(), min(size, len(excluded) + 1)):
            config = self.config((start + step) % size)
            if config_key(config) not in excluded:
                return config
        return None
