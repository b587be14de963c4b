"""A small space's valid configs, listed once per search: what lets a search hand a trial a config it has not tried
when the sampler (and the redraw of a tried draw as a neighbour) keeps returning tried ones, and know when it has
tried them all.

Listing checks the constraints once per combination of the constrained knobs' values (free knobs multiply the count
without being checked), so it is done only where there are at most ENUMERABLE such combinations: about 0.2 s for a
layer norm, 0.8 s for a matmul at the cap. The built-in families' spaces (1-2 million combinations) are never listed;
their searches end by --trials or by the run of duplicates the loop allows (runner.py).

count_valid says how many configs are valid for `mage-tune space`: counted where the space would be listed, else
estimated from a seeded sample of SAMPLED constrained combinations (a quarter of a second for a matmul), with a 95%
interval, labelled as an estimate; counting matmul's 2 million combinations exactly takes about 10 s.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from mage_tune.kernels.base import Config
from mage_tune.kernels.neighbours import config_key
from mage_tune.problem import Problem

ENUMERABLE = 200_000  # the most combinations of the constrained knobs' values a search checks to list its space
# (and `mage-tune space` checks to count its valid configs exactly, unless --exact asks whatever it takes)


@dataclass(frozen=True)
class Space:
    """The valid configs of a family at one shape and arch, indexable without building them all: each valid tuple of
    the constrained knobs times every combination of the free knobs' values."""

    problem: Problem
    bound: tuple[tuple, ...]  # the valid value tuples of the constrained knobs, in knob order
    free: tuple[tuple, ...]  # the free knobs' domains, in knob order

    @classmethod
    def listed(cls, problem: Problem, cap: int | None = None) -> Space | None:
        """The space, or None where its constrained knobs have more than `cap` (ENUMERABLE) combinations: never
        listed."""
        family = problem.family
        if math.prod(len(k.domain) for k in family.knobs if not k.free) > (ENUMERABLE if cap is None else cap):
            return None
        bound = tuple(family.bound_combinations(problem.shape, problem.arch))
        return cls(problem, bound, tuple(tuple(k.domain) for k in family.knobs if k.free))

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
        return self.problem.family.join_combination(self.bound[bound], tuple(reversed(values)))

    def member(self, config: dict, valid: bool | None = None) -> bool:
        """Whether `config` (a record's, say) is one of the space's: every knob set to a value of its domain, none
        more, and no constraint broken. `valid`: whether its constraints hold, where the caller has just checked
        them (a search's trial); None checks them here."""
        if self.problem.family.config_problems(config):
            return False
        return not self.problem.violations(config) if valid is None else valid

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


# --- how many are valid, without walking a large space ------------------------------------------------------------

SAMPLED = 50_000  # the combinations of the constrained knobs' values a count checks to estimate a larger space
Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


@dataclass(frozen=True)
class Count:
    """How many configs of a space are valid: counted (`valid`, and the estimate and bounds equal to it), or
    estimated from a seeded uniform sample of the constrained knobs' combinations (`valid` None; `estimate` within
    `low`..`high`, a 95% interval). `combinations` is how many combinations the constrained knobs have, `sampled` how
    many of them were checked to estimate (0 when counted)."""

    valid: int | None
    estimate: int
    low: int
    high: int
    combinations: int
    sampled: int = 0

    @classmethod
    def of(cls, valid: int, combinations: int = 0) -> Count:
        """A count that is exact: `valid` configs."""
        return cls(valid, valid, valid, valid, combinations)

    @property
    def exact(self) -> bool:
        return self.valid is not None

    def json(self) -> dict:
        """The fields `space --json` adds to its last line: {"count": "exact"}, or {"count": "estimate", "estimate":
        {...}} with "valid" null beside it."""
        if self.exact:
            return {"count": "exact"}
        return {
            "count": "estimate",
            "estimate": {
                "valid": self.estimate,
                "low": self.low,
                "high": self.high,
                "confidence": 0.95,
                "sampled": self.sampled,
                "combinations": self.combinations,
            },
        }

    def text(self) -> str:
        """`N valid configs`, or `about N valid configs` (the estimate, to three figures), for `space`."""
        return f"{self.valid} valid configs" if self.exact else f"about {_rounded(self.estimate)} valid configs"

    def note(self) -> str:
        """What an estimate is, for `space` to say under it: its sample and 95% interval; empty when exact."""
        if self.exact:
            return ""
        low, high = _rounded(self.low), _rounded(self.high)
        if low.split()[1:] == high.split()[1:]:  # 834 to 872 thousand
            low = low.split()[0]
        return (
            f"estimated from {self.sampled:,} of the {self.combinations:,} combinations of the constrained knobs' "
            f"values (95%: {low} to {high}); --exact counts them all"
        )


def count_valid(problem: Problem, exact: bool = False, known: int = 0, seed: int = 0) -> Count:
    """How many configs are valid: counted where the constrained knobs have at most ENUMERABLE combinations (what a
    search lists: about a second at most) or `exact` is asked, else estimated from a seeded sample of SAMPLED of
    them, never walking the space. `known`: how many valid configs the caller has seen (a floor for the estimate)."""
    family = problem.family
    bound = [k for k in family.knobs if not k.free]
    free = math.prod(len(k.domain) for k in family.knobs if k.free)
    total = math.prod(len(k.domain) for k in bound)
    if exact or total <= max(ENUMERABLE, SAMPLED):
        return Count.of(family.count_configs(problem.shape, problem.arch), total)
    firsts = {k.name: k.domain[0] for k in family.knobs if k.free}
    hits = 0
    for index in sorted(random.Random(seed).sample(range(total), SAMPLED)):
        chosen = {}
        for knob in reversed(bound):  # the index's digits, the last knob's the fastest (itertools.product's order)
            index, i = divmod(index, len(knob.domain))
            chosen[knob.name] = knob.domain[i]
        config = {**{k.name: chosen[k.name] for k in bound}, **firsts}  # as bound_combinations checks it
        hits += not problem.violations(config)
    low, high = _wilson(hits, SAMPLED, total)
    low = max(low, hits) * free  # the valid combinations sampled are valid; the invalid ones are not
    high = min(high, total - (SAMPLED - hits)) * free
    low = max(low, known)
    high = max(high, low)
    estimate = min(max(round(hits / SAMPLED * total) * free, low), high)
    return Count(None, estimate, low, high, total, SAMPLED)


def _wilson(hits: int, n: int, total: int) -> tuple[int, int]:
    """The 95% Wilson score interval of how many of `total` combinations are valid, `hits` of `n` drawn without
    replacement (the finite-population correction narrows it as n nears total), as counts of combinations."""
    n_eff = n * (total - 1) / (total - n)
    p = hits / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = Z95 / (1 + z2 / n_eff) * math.sqrt(p * (1 - p) / n_eff + z2 / (4 * n_eff * n_eff))
    return math.floor(max(0.0, centre - half) * total), math.ceil(min(1.0, centre + half) * total)


def _rounded(count: int) -> str:
    """A count to three significant figures, in words past a thousand: 7.53 million, 858 thousand, 412."""
    if count >= 10**12:
        return f"{count:.3g}"
    for size, word in ((10**9, "billion"), (10**6, "million"), (10**3, "thousand")):
        if count >= size:
            return f"{count / size:.3g} {word}"
    return str(count)
