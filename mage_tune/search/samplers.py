"""The samplers a search draws configs with, as one registry: `mage-tune search --sampler` offers its names, and a
new sampler is one entry here. Kept free of heavy imports (Optuna loads when a sampler is made), so the CLI can read
the names and `--help` stays instant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mage_tune.errors import InputError

if TYPE_CHECKING:
    from mage_tune.kernels.base import Family

# optuna loads on first use, when a sampler is made: the CLI imports this module for `search --help`.


@dataclass(frozen=True)
class SamplerEntry:
    help: str
    make: Callable[[Family, int | None], object]  # (family, seed) -> an Optuna sampler
    settled: bool = False  # its draws become the configs that run before Optuna records them (valid_draws.py)


def _tpe(family: Family, seed: int | None):
    import optuna

    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=10)


def _random(family: Family, seed: int | None):
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _grid(family: Family, seed: int | None):
    import optuna

    class GridSampler(optuna.samplers.GridSampler):
        def after_trial(self, study, trial, state, values) -> None:
            """Optuna's GridSampler calls Study.stop() once the grid is covered, which raises outside
            Study.optimize (this loop asks and tells); --trials ends the search, and past the grid points repeat."""

    return GridSampler({k.name: list(k.domain) for k in family.knobs}, seed=seed)


def _cmaes(family: Family, seed: int | None):
    import optuna

    # CMA-ES needs numbers; categorical knobs fall back to the independent sampler (Optuna warns once).
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


SAMPLERS: dict[str, SamplerEntry] = {
    "tpe": SamplerEntry("Optuna's TPE, with a constant liar for parallel workers (the default)", _tpe, True),
    "random": SamplerEntry("uniform draws", _random, True),
    "grid": SamplerEntry("every config of the knobs' domains, in a seeded order; no polish", _grid),
    "cmaes": SamplerEntry("CMA-ES over numeric knobs, categorical ones drawn independently", _cmaes),
}


def make_sampler(name: str, family: Family, seed: int | None):
    if name not in SAMPLERS:
        raise InputError(f"unknown sampler {name!r}; choose {', '.join(SAMPLERS)}")
    return SAMPLERS[name].make(family, seed)
