"""A search of a small space stops once it has tried every valid config, and duplicates never count toward --trials.

What each test shows:
  * a listed space (space.py) is the family's valid configs, no more and no fewer, indexed without building them;
    a space whose constrained knobs have more combinations than the cap is never listed;
  * `search --trials 40` of a six-config space stops after the six, says so, and trials.jsonl holds each config
    once as a counted trial (--json says why it stopped);
  * two configs that build one kernel with one launch: the second is recorded as a duplicate and does not count;
  * with keep_going (--keep-going-when-exhausted) the search draws on past the six, recording duplicates that never
    count, and ends after DUPLICATE_RUN of them in a row; so does a search whose space is too large to list;
  * two workers on one study stop together, with each config run once.

Static searches (the census model) with real NVRTC/ptxas compiles of layer norm at 256×64, in the session's compile
cache (conftest). The families are tests/fixtures/data/tiny_layernorm_family.py's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest

from mage_tune.arch import get_arch
from mage_tune.kernels import get_family
from mage_tune.kernels.layernorm import LayerNorm
from mage_tune.kernels.neighbours import config_key
from mage_tune.kernels.registry import load_family
from mage_tune.problem import Problem
from mage_tune.search import record, runner, space
from mage_tune.search.runner import COUNTED, RECORDED, Search
from mage_tune.search.space import Space
from mage_tune.search.spec import SearchSpec

FAMILIES = Path(__file__).parents[1] / "fixtures" / "data" / "tiny_layernorm_family.py"
TINY = f"{FAMILIES}:TINY"
SHAPE = {"m": 256, "d": 64}
EXHAUSTED = "all 6 valid configs of the space have been modelled; stopping after 6 trials"


def _spec(run_dir: Path, trials: int, **more) -> SearchSpec:
    family = load_family(TINY)
    return SearchSpec(
        family.name,
        SHAPE,
        get_arch("sm_90"),
        trials,
        "tpe",
        None,
        "tiny",
        run_dir,
        2,
        True,
        1,
        family.origin,
        db="off",
        **more,
    )


def _counted_configs(run_dir: Path) -> list[str]:
    return [config_key(t["config"]) for t in record.trials(run_dir) if t["outcome"] in COUNTED]


def _flat(text: str) -> str:
    """Output as one line: the CLI wraps long lines to the terminal."""
    return " ".join(text.split())


# --- the listed space ------------------------------------------------------------------------------------------------


def test_a_listed_space_is_the_valid_configs():
    family = load_family(TINY)
    listed = Space.listed(Problem(family, SHAPE, get_arch("sm_90")))
    assert listed.size == family.count_configs(SHAPE, get_arch("sm_90")) == 6
    configs = [listed.config(i) for i in range(listed.size)]
    assert sorted(map(config_key, configs)) == sorted(map(config_key, family.configs(SHAPE, get_arch("sm_90"))))
    assert all(listed.member(c) for c in configs)
    assert not listed.member({**configs[0], "threads": 1024})  # not in the domain
    assert not listed.member({k: v for k, v in configs[0].items() if k != "rows"})  # a knob missing

    keys = {config_key(c) for c in configs}
    assert listed.untried(keys, "1") is None
    for left in configs:
        assert listed.untried(keys - {config_key(left)}, "1") == left
    assert listed.untried(set(), "1") == listed.untried(set(), "1")  # seeded

    assert (
        Space.listed(Problem(get_family("layernorm"), SHAPE, get_arch("sm_90"))) is None
    )  # 1 078 272 combinations: never listed


def test_free_knobs_multiply_a_listed_space():
    """x_prefetch and y_hint are free (no constraint reads them): the space lists each valid tuple of the others
    once and indexes the free knobs' values."""
    domains = {"threads": (128, 256), "x_prefetch": (0, 1, 2), "y_hint": ("none", "evict_first")}

    class Free(LayerNorm):
        knobs = tuple(dataclasses.replace(k, domain=domains.get(k.name, k.domain[:1])) for k in LayerNorm.knobs)

    family = Free()
    listed = Space.listed(Problem(family, SHAPE, get_arch("sm_90")))
    assert len(listed.bound) == 2 and listed.size == 12 == family.count_configs(SHAPE, get_arch("sm_90"))
    configs = [listed.config(i) for i in range(listed.size)]
    assert sorted(map(config_key, configs)) == sorted(map(config_key, family.configs(SHAPE, get_arch("sm_90"))))


# --- a search that runs out of configs -------------------------------------------------------------------------------


def test_a_small_space_stops_once_every_config_is_tried(tmp_path, compile_cache):
    env = {**os.environ, "MAGE_TUNE_CACHE": str(compile_cache)}
    args = ["search", TINY, "--m", "256", "--d", "64", "--trials", "40", "--static", "--seed", "1"]
    args += ["--run-dir", "run", "--db", "off", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert EXHAUSTED in _flat(done.stderr)
    said = json.loads(done.stdout)
    assert said["stopped"] == EXHAUSTED

    run_dir = tmp_path / "run"
    configs = _counted_configs(run_dir)
    family = load_family(TINY)
    assert sorted(configs) == sorted(map(config_key, family.configs(SHAPE, get_arch("sm_90"))))  # each config once
    lines = record.trials(run_dir)
    assert all(t["outcome"] != "duplicate" for t in lines)  # none was needed: the search drew untried ones
    name = json.loads((run_dir / "search.json").read_text())["study"]
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{run_dir.resolve() / 'study.db'}")
    assert sum(t.user_attrs.get("outcome") in COUNTED for t in study.trials) == 6

    # Run again, it stops at once and says so again: nothing is left to try.
    again = subprocess.run(
        [sys.executable, "-m", "mage_tune", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert EXHAUSTED in _flat(again.stderr)
    assert len(record.trials(run_dir)) == len(lines)


class SharedKernel(LayerNorm):
    """persist=2 and 4 build one kernel, and at m=256 both launch the 256 row groups: one run each, for two
    threads values."""

    knobs = tuple(
        dataclasses.replace(k, domain={"threads": (128, 256), "persist": (2, 4)}.get(k.name, k.domain[:1]))
        for k in LayerNorm.knobs
    )


def test_a_duplicate_is_recorded_and_never_counts(tmp_path):
    """Four configs, two kernels: the grid runs all four, the two duplicates are recorded with the trial they repeat
    and their value, the study counts two trials, and the search stops once all four configs were tried."""
    said: list[str] = []
    spec = SearchSpec(
        "layernorm", SHAPE, get_arch("sm_90"), 4, "grid", None, "shared", tmp_path / "run", 1, True, 0, db="off"
    )
    search = Search(spec, SharedKernel(), said.append)
    search.run(lambda done, best: None)
    lines = sorted(record.trials(tmp_path / "run"), key=lambda t: t["number"])
    assert Counter(t["outcome"] for t in lines) == {"modelled": 2, "duplicate": 2}
    by_number = {t["number"]: t for t in lines}
    for t in lines:
        if t["outcome"] == "duplicate":
            first = by_number[t["duplicate_of"]]
            assert first["outcome"] == "modelled" and first["value"] == t["value"]
            assert first["config"]["threads"] == t["config"]["threads"]
            assert first["config"]["persist"] != t["config"]["persist"]
    assert sum(t.user_attrs.get("outcome") in COUNTED for t in search.study.trials) == 2
    assert said == ["all 4 valid configs of the space have been modelled; stopping after 2 trials"]


def test_keep_going_draws_on_until_duplicates_in_a_row(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "DUPLICATE_RUN", 4)
    said: list[str] = []
    search = Search(_spec(tmp_path / "run", 40, keep_going=True), load_family(TINY), said.append)
    search.run(lambda done, best: None)
    lines = sorted(record.trials(tmp_path / "run"), key=lambda t: t["number"])
    assert [t["outcome"] for t in lines[-4:]] == ["duplicate"] * 4  # it ran on past the six
    assert len(set(_counted_configs(tmp_path / "run"))) == len(_counted_configs(tmp_path / "run")) == 6
    assert search.stopped == (
        "the last 4 trials were all duplicates of configs already tried (recorded, never counted): the sampler finds "
        "nothing new; stopping after 6 trials"
    )
    assert said == [search.stopped]  # never the exhaustion: it was asked to go on
    assert {t.user_attrs.get("outcome") for t in search.study.trials} <= set(RECORDED)


def test_a_space_too_large_to_list_ends_on_duplicates(tmp_path, monkeypatch):
    """Where the space is not listed the search cannot know it is exhausted: once the sampler finds nothing new,
    the run of duplicates ends it."""
    monkeypatch.setattr(space, "ENUMERABLE", 5)  # the six-config space is now too large to list
    monkeypatch.setattr(runner, "DUPLICATE_RUN", 3)
    search = Search(_spec(tmp_path / "run", 40), load_family(TINY), lambda text: None)
    search.run(lambda done, best: None)
    assert search.space is None
    assert "stopping after 6 trials" in search.stopped and "duplicates" in search.stopped
    assert len(set(_counted_configs(tmp_path / "run"))) == 6


def test_two_workers_on_one_study_stop_together(tmp_path):
    """The --gpus orchestration with static workers (as tests/tuning does): both stop once the six configs ran,
    each config ran once, and the study counts six."""
    from mage_tune.search.gpus import run_on_gpus

    spec = _spec(tmp_path / "run", 40)
    parent = Search(spec, load_family(TINY), print)
    parent.heartbeat.close()
    run_on_gpus(spec, parent.study, ["0", "1"], lambda done, best: None)
    configs = _counted_configs(tmp_path / "run")
    assert sorted(configs) == sorted(map(config_key, load_family(TINY).configs(SHAPE, get_arch("sm_90"))))
    assert sum(t.user_attrs.get("outcome") in COUNTED for t in parent.study.get_trials()) == 6
    numbers = [t["number"] for t in record.trials(tmp_path / "run")]
    assert len(numbers) == len(set(numbers))


def test_the_help_names_the_cap_the_runner_uses():
    from mage_tune.cli import search_cmd

    assert search_cmd.DUPLICATE_RUN == runner.DUPLICATE_RUN
    assert space.ENUMERABLE == 200_000  # the figure search --help gives


@pytest.mark.parametrize("outcome", ["duplicate", "surplus"])
def test_outcomes_that_do_not_count(outcome):
    assert outcome not in COUNTED
    assert (outcome in RECORDED) == (outcome == "duplicate")
