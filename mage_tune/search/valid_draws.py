"""A drawing sampler whose draws the search turns into the configs that run before Optuna records them.

TPE knows no constraint: in a constrained space most of its draws break one (50 of 61 TPE trials of each
matmul-bf16 search at two shapes no record held, on an H100), and the search runs each as its nearest valid config,
or as an untried neighbour where the draw was tried. Optuna records a trial's params when they are suggested, so
with the draw suggested as drawn the study held configs that never ran, each with the time of another, and TPE's
model learned from those. Here the inner sampler draws first (jointly where it models the knobs together, as Optuna
5's TPE does after its startup trials), draws again (up to DRAWS times) while the draw breaks a constraint, hands it
to the search's `settle` (repair, then an untried neighbour where tried), and what that returns is suggested as the
trial's relative params: the study's params are the config that runs. Trials enqueued with fixed params (warm
start, polish) are left as they are.

Measured on the static model (matmul-bf16, 100 trials, no polish, no database, seeds 1-3), the best found, with the
draw recorded as drawn → through ValidDraws: at 2688 × 4864 × 3456 263.7 / 311.1 / 311.1 µs → 256.7 / 256.9 /
242.6; at 5376 × 2048 × 2304 218.9 / 201.9 / 223.9 → 199.7 / 168.4 / 168.4; trials pruned 15-32 → 5-10 of 100.
Replayed over the exhaustive layer-norm table (records/h200-2026-11-29.tar.xz:ln_d768_all.json, 1,896 configs;
analysis/search_efficiency.py, 30 seeds), TPE's median trials to within 3 % of the best went from 23 (each draw
told as drawn, one outside the table pruned) to 18.5; the random draws' from 29 to 24.5."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from mage_tune.kernels.base import Config

Settle = Callable[[int, Config], Config]  # (trial number, the inner sampler's draw) -> the config that runs
Valid = Callable[[Config], bool]  # whether a draw keeps every constraint


DRAWS = 8  # eight joint TPE draws cost 0.18 s a trial at 100 trials on SQLite, a compile takes seconds


class ValidDraws(BaseSampler):
    def __init__(self, inner: BaseSampler, domains: dict[str, list], settle: Settle, valid: Valid = lambda c: True):
        """domains: each knob's values, as the caller suggests them (suggest_categorical(name, values))."""
        self.inner = inner
        self.valid = valid
        self.space = {name: CategoricalDistribution(values) for name, values in domains.items()}
        self.settle = settle

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self.space)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if trial.system_attrs.get("fixed_params"):  # enqueued: its params are given
            return {}
        for _ in range(DRAWS):
            drawn = self._draw(study, trial, search_space)
            if self.valid(drawn):
                break
        return self.settle(trial.number, drawn)

    def _draw(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> Config:
        """One draw of every knob as the inner sampler makes it: jointly where it models knobs together (Optuna 5's
        TPE is multivariate by default, once its startup trials are done), each knob on its own for the rest."""
        joint = self.inner.infer_relative_search_space(study, trial)
        drawn = dict(self.inner.sample_relative(study, trial, joint)) if joint else {}
        for name, dist in search_space.items():
            if name not in drawn:
                drawn[name] = self.inner.sample_independent(study, trial, name, dist)
        return drawn

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
