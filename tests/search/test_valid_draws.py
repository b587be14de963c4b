"""ValidDraws: a sampler's draw is settled (repaired, redrawn) before Optuna records it, so the study holds
the configs that ran and TPE learns from their times; a draw that breaks a constraint is first drawn again."""

from __future__ import annotations

import optuna
import pytest

from mage_tune.kernels.base import Knob
from mage_tune.search.samplers import make_sampler
from mage_tune.search.valid_draws import ValidDraws

pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")


class Toy:
    """A family's knobs as ValidDraws reads them: x from 0 to 7; y free."""

    name = "toy"
    knobs = (Knob("x", tuple(range(8)), "x"), Knob("y", (1, 2, 3), "y"))


DOMAINS = {k.name: list(k.domain) for k in Toy.knobs}


def settle(number: int, drawn: dict) -> dict:
    """The nearest valid config where x <= 5 is the constraint: x capped at 5."""
    return {**drawn, "x": min(drawn["x"], 5)}


def invalid_draws_settled(valid, trials: int = 60) -> int:
    """How many of the draws handed to settle broke the constraint x <= 1 (two of x's eight values), drawn uniformly;
    `valid`: the check ValidDraws draws again by."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settled: list[dict] = []

    def noting(number: int, config: dict) -> dict:
        settled.append(config)
        return {**config, "x": min(config["x"], 1)}

    study = optuna.create_study(sampler=ValidDraws(make_sampler("random", Toy, seed=2), DOMAINS, noting, valid))
    for _ in range(trials):
        trial = study.ask()
        for k in Toy.knobs:
            trial.suggest_categorical(k.name, list(k.domain))
        study.tell(trial, 1.0)
    return sum(c["x"] > 1 for c in settled)


def test_the_study_holds_the_settled_config_and_enqueued_params_as_given():
    sampler = ValidDraws(make_sampler("random", Toy, seed=1), DOMAINS, settle)
    study = optuna.create_study(sampler=sampler)
    study.enqueue_trial({"x": 7, "y": 2})  # given params are the caller's: never settled by the sampler
    given = study.ask()
    assert {k.name: given.suggest_categorical(k.name, list(k.domain)) for k in Toy.knobs} == {"x": 7, "y": 2}
    study.tell(given, 1.0)
    for _ in range(30):
        trial = study.ask()
        params = {k.name: trial.suggest_categorical(k.name, list(k.domain)) for k in Toy.knobs}
        assert params["x"] <= 5
        study.tell(trial, 1.0)
    assert {t.params["x"] for t in study.trials[1:]} <= set(range(6))
    assert len({t.params["x"] for t in study.trials[1:]}) >= 3  # the random draws still spread over the valid x


def test_a_draw_that_breaks_a_constraint_is_drawn_again_before_it_is_settled():
    """The sampler's own valid draw beats a repair: up to DRAWS draws are made for one that passes the check (here
    8 uniform draws all miss x <= 1 about one time in ten), and only then is the last draw settled."""
    assert invalid_draws_settled(lambda c: c["x"] <= 1) <= 15
    assert invalid_draws_settled(lambda c: True) >= 30


def test_a_multivariate_sampler_draws_the_knobs_together():
    """Optuna 5's TPE models the knobs jointly once its startup trials are done: ValidDraws draws through its joint
    model (sample_relative), not knob by knob."""
    joint_draws = []

    class Counting(optuna.samplers.TPESampler):
        def sample_relative(self, study, trial, search_space):
            drawn = super().sample_relative(study, trial, search_space)
            joint_draws.append(set(drawn))
            return drawn

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=ValidDraws(Counting(seed=4, n_startup_trials=3), DOMAINS, settle))
    for _ in range(10):
        trial = study.ask()
        params = {k.name: trial.suggest_categorical(k.name, list(k.domain)) for k in Toy.knobs}
        assert params["x"] <= 5
        study.tell(trial, 100.0 + params["y"])
    assert sum(drawn == {"x", "y"} for drawn in joint_draws) >= 7  # every trial after the three startup ones
