"""A drawing sampler whose draws the search turns into the configs that run before Optuna records them.

TPE draws each knob on its own; in a constrained space most of its draws break a constraint (50 of 61 TPE trials of
each matmul-bf16 search at two shapes no record held, on an H100) and the search runs each as its nearest valid
config, or as an untried neighbour where the draw was tried. Optuna records a trial's params when they are suggested,
so with the draw suggested as drawn the study held configs that never ran, each with the time of another: TPE's model
learned from those. Here the inner sampler's per-knob draws are made first, drawn again (up to DRAWS times) while
they break a constraint, handed to the search's `settle` (repair, then an untried neighbour where tried), and what it
returns is suggested as the trial's relative params: the study's params are the config that runs. Trials enqueued
with fixed params (warm start, polish) are left as they are.

Measured on the static model (matmul-bf16 2688 × 4864 × 3456, 100 trials, seeds 1-3, no polish): the best found
263.7 / 311.1 / 311.1 µs with draws recorded as drawn, 237.0 / 256.7 / 311.1 through ValidDraws."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from mage_tune.kernels.base import Config, Family

Settle = Callable[[int, Config], Config]  # (trial number, the inner sampler's draw) -> the config that runs
Valid = Callable[[Config], bool]  # whether a draw keeps every constraint


DRAWS = 8  # a full draw of ~17 knobs costs TPE about 30 ms at 100 trials: at most a quarter second a trial


class ValidDraws(BaseSampler):
    def __init__(self, inner: BaseSampler, family: Family, settle: Settle, valid: Valid = lambda config: True):
        self.inner = inner
        self.valid = valid
        self.space = {k.name: CategoricalDistribution(list(k.domain)) for k in family.knobs}
        self.settle = settle

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self.space)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if trial.system_attrs.get("fixed_params"):  # enqueued: its params are given
            return {}
        for _ in range(DRAWS):
            drawn = {name: self.inner.sample_independent(study, trial, name, d) for name, d in search_space.items()}
            if self.valid(drawn):
                break
        return self.settle(trial.number, drawn)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: list[float] | None
    ) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
