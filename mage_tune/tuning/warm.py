"""Warm start: the first trials of a new search, chosen from what the tuning database has measured.

1. The best configs measured at the nearest shapes (same family and arch; distance on log2 of each dimension, a
   shape measured on another GPU counted as differing in one more dimension by a factor of two:
   tuning.db.run_distance), round-robin over the nearest few shapes, each checked valid here.
2. Knob values no measured trial of the database has taken (a knob or a value newer than the records: a model
   trained on those records cannot know what they do), each tried once on the best nearest config, changing as few
   other knobs as its constraints need.
3. The family's own picks for the shape (Family.shape_seeds: matmul-bf16's large tiles that fill its waves best),
   which no model trained on other shapes can rank where the data holds no such tile.
4. Then a model trained on the database (tuning/learned.py) ranks a random sample of valid configs without
   compiling, the best few are compiled and censused, and the model with census features picks among them: its
   best, each a few knobs from the others (not one config in six rasters).

With nothing measured at all, the family's defaults (where valid at the shape) go first, then its picks for the shape.

The trials shipped with the package (tuning/shipped.py: H200 and H100) of the family and arch join the database's,
every GPU's: the nearest shapes favour the searching GPU's own, and the model learns from all of them (its target is
a time over the run's own cuBLAS or copy, so runs of two GPUs teach one ranking). Held out in turn, the five H100
shapes searched with about 100 trials each are ranked with a mean top-5 regret of 1.006 by a model trained on both
GPUs' other shapes, 1.006 on the H100's alone and 1.014 on the H200's alone (`python analysis/model_holdout.py
--family matmul-bf16 --gpu "NVIDIA H100 80GB HBM3"`, the records to h100-2026-12-06-unseen-regimes; both GPUs' and
the H100's alone were 1.010 and 1.012 with the records of the day before and the baseline as every run's reference).
The first note says what joined.
A search without a GPU (static) never reads them: their times are a GPU's, and its own objective is the census
model's.

The seeds are enqueued into the study ahead of the sampler, each with a `source` saying where it came from; TPE (or
the sampler asked for) counts them among its start-up trials and goes on from there.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass

from mage_tune.census import census_variant
from mage_tune.census.features import features as census_features
from mage_tune.errors import MageError
from mage_tune.kernels.base import Config, Shape
from mage_tune.kernels.neighbours import config_key, neighbours
from mage_tune.kernels.pool import build_many
from mage_tune.problem import Problem
from mage_tune.tuning import learned, shipped
from mage_tune.tuning.db import Entry, measured_by_gpu_and_shape, measured_by_shape, run_distance

NEAREST_SHAPES = 3
PER_SHAPE = 2
MODEL_PICKS = 6
PICKS_APART = 3  # knobs in which each model pick differs from every earlier one (where the shortlist has such)
NEW_VALUE_PICKS = 6
POOL = 3000
COMPILED = 24


@dataclass(frozen=True)
class Seed:
    config: Config
    source: str


@dataclass(frozen=True)
class WarmStart:
    seeds: tuple[Seed, ...]
    notes: tuple[str, ...]  # what was used and what was not, for the log and the report
    model: learned.TimeModel | None = None  # the model without census features, which the polish ranks by


def valid_here(problem: Problem, config: Config) -> Config | None:
    """The config completed to this family's knobs (a record from before a knob existed takes its default) and
    checked at this shape; None when it cannot run here."""
    known = {k: v for k, v in config.items() if k in {kn.name for kn in problem.family.knobs}}
    if len(known) != len(config):
        return None
    try:
        return problem.family.complete(known, problem.shape, problem.arch)
    except MageError:
        return None


def usable_entries(entries: list[Entry], shape: Shape, other_shapes_only: bool) -> list[Entry]:
    rows = [e for e in entries if e.measured and set(e.run.shape) == set(shape)]
    if other_shapes_only:
        rows = [e for e in rows if e.run.shape != shape]
    return rows


def nearest_seeds(problem: Problem, entries: list[Entry], gpu: str) -> list[Seed]:
    """The best PER_SHAPE configs of each of the NEAREST_SHAPES nearest (GPU, shape) measured, round-robin; a seed
    of another GPU's trials says whose. A static search (`gpu` "") measures on no GPU: its groups are shapes, every
    GPU's trials ranked together. Ties go to `entries`' order: the database's before the shipped data's."""
    groups = measured_by_gpu_and_shape(entries).values() if gpu else measured_by_shape(entries).values()
    ranked = sorted(groups, key=lambda rows: (run_distance(rows[0].run, problem.shape, gpu), rows[0].run.gpu != gpu))
    ranked = ranked[:NEAREST_SHAPES]
    per_shape: list[list[Seed]] = []
    for rows in ranked:
        picks: list[Seed] = []
        run = rows[0].run
        where = run.shape_key() + (f" on {run.gpu or 'an unnamed GPU'}" if gpu and run.gpu != gpu else "")
        for e in rows:
            config = valid_here(problem, e.config)
            if config is None or any(p.config == config for p in picks):
                continue
            picks.append(Seed(config, f"nearest {where} #{len(picks) + 1}"))
            if len(picks) == PER_SHAPE:
                break
        per_shape.append(picks)
    out: list[Seed] = []
    for rank in range(PER_SHAPE):
        for picks in per_shape:
            if rank < len(picks) and all(s.config != picks[rank].config for s in out):
                out.append(picks[rank])
    return out


def new_value_seeds(
    problem: Problem, entries: list[Entry], near: list[Seed], model: learned.TimeModel | None = None
) -> tuple[list[Seed], str]:
    """The best nearest config with each knob value no entry has taken (records from before a knob existed count
    at its default), so what the template gained since the records is measured in the first trials; and a note
    naming those values ("" when there are none). Where there are more than NEW_VALUE_PICKS, the model (trained
    without census features) picks the ones it expects fastest here: of the 19 tile widths a knob gained at once,
    the few that fill this shape's waves, not the first few in the knob's order."""
    if not near:
        return [], ""
    family = problem.family
    names = {k.name for k in family.knobs}
    taken: dict[str, set] = {name: set() for name in names}
    for e in entries:
        for name, value in family.with_defaults({k: v for k, v in e.config.items() if k in names}).items():
            taken[name].add(value)
    base = near[0]
    fresh = {k.name: [v for v in k.domain if v not in taken[k.name]] for k in family.knobs}
    near_keys = {config_key(s.config) for s in near}
    found = neighbours(family, [(base.source, base.config)], problem.shape, problem.arch, near_keys, "new value", fresh)
    if model is None:
        picks = list(itertools.islice(found, NEW_VALUE_PICKS))
    else:
        every = list(found)
        times = model.predict([learned.features(problem, n.config, None) for n in every]) if every else []
        ranked = sorted(range(len(every)), key=lambda i: times[i])  # stable: ties keep the knob's order
        picks = [every[i] for i in ranked[:NEW_VALUE_PICKS]]
    values = ", ".join(f"{n.knob}={n.value}" for n in picks)
    note = f"{len(picks)} with knob values the database has not measured: {values}" if picks else ""
    return [Seed(n.config, n.source) for n in picks], note


def random_valid(problem: Problem, count: int, seed: int) -> list[Config]:
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Config] = []
    for _ in range(count * 20):
        config = {k.name: rng.choice(k.domain) for k in problem.family.knobs}
        key = json.dumps(config, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        if not problem.violations(config):
            out.append(config)
            if len(out) == count:
                break
    return out


def spread_picks(ranked: list[Config]) -> list[Config]:
    """MODEL_PICKS of `ranked` (best first), each PICKS_APART knobs or more from every earlier pick, then the best
    of the rest where too few are that far apart. A model's shortlist tends to hold one config in variants the model
    barely tells apart (at 5000 x 2600 x 4000 four of matmul-bf16's six picks were one 128 x 224 tile in other
    clusters, rasters and stream-K: tests/fixtures/holdout-searches/call6): one trial of each measures as much, and
    the polish walks a winner's one-knob neighbours anyway."""
    picks: list[Config] = []
    for config in ranked:
        if all(sum(config[k] != p[k] for k in config) >= PICKS_APART for p in picks):
            picks.append(config)
            if len(picks) == MODEL_PICKS:
                return picks
    return picks + [c for c in ranked if c not in picks][: MODEL_PICKS - len(picks)]


def model_seeds(
    problem: Problem,
    rows: list[learned.Row],
    plain: learned.TimeModel | None,
    taken: list[Config],
    workers: int,
    seed: int,
) -> tuple[list[Seed], str, learned.TimeModel | None]:
    """The model's picks among a random sample of valid configs: ranked by `plain` (fitted on `rows` without census
    features), the best compiled and censused, and ranked again by a model with census features."""
    if plain is None:
        runs = len({r.run for r in rows})
        need = f"needs {learned.MIN_ROWS} over {learned.MIN_RUNS}"
        return [], f"no model: {len(rows)} measured trials over {runs} runs ({need})", None
    pool = [c for c in random_valid(problem, POOL, seed) if c not in taken]
    if not pool:
        return [], "no model seeds: no valid config left to rank", plain
    scores = plain.predict([learned.features(problem, c, None) for c in pool])
    shortlist = [c for _, c in sorted(zip(scores, pool, strict=True), key=lambda p: p[0])[:COMPILED]]
    full = learned.fit(rows, with_census=True, seed=seed)
    note = f"model: {plain.rows} measured trials over {plain.runs} runs; ranked {len(pool)} configs"
    if full is None:
        picks = spread_picks(shortlist)
        return [Seed(c, f"model #{i + 1}") for i, c in enumerate(picks)], note + " (no census features yet)", plain

    built: list[tuple[float, Config]] = []
    for config, variant in build_many(problem.family, problem.shape, problem.arch, shortlist, workers):
        if isinstance(variant, MageError):
            continue
        census = census_variant(variant)
        row = learned.features(problem, config, census_features(census))
        built.append((full.predict([row])[0], config))
    built.sort(key=lambda p: p[0])
    picks = spread_picks([c for _, c in built])
    note += f", compiled and censused the best {len(shortlist)}, census model on {full.rows} trials"
    return [Seed(c, f"model #{i + 1}") for i, c in enumerate(picks)], note, plain


def picks_note(picks: list[Seed]) -> list[str]:
    """The warm start's line on the family's picks (none where there are none), one wording for every path."""
    return [f"warm start: {len(picks)} of the family's picks for this shape"] if picks else []


def family_seeds(problem: Problem, taken: list[Config]) -> list[Seed]:
    """The family's own picks for this shape (Family.shape_seeds), those not already taken, each valid here."""
    out: list[Seed] = []
    for why, config in problem.family.shape_seeds(problem.shape, problem.arch):
        config = valid_here(problem, config)
        if config is not None and config not in taken and all(s.config != config for s in out):
            out.append(Seed(config, f"family pick: {why}"))
    return out


COLD_NOTE = "warm start: the tuning database has no measured trial of this family and arch"


def cold_start(problem: Problem, note: str = COLD_NOTE) -> WarmStart:
    """Nothing measured of the family and arch (or, `note` says, nothing readable): the family's defaults, its
    author's pick, go first (where they are valid at this shape), so a search's first trial is never worse than a
    bench without --set; then the family's picks for the shape."""
    default = valid_here(problem, problem.family.defaults())
    first = [] if default is None else [Seed(default, "default")]
    picks = family_seeds(problem, [s.config for s in first])
    notes = [f"{note}; the family's defaults first" if first else note, *picks_note(picks)]
    return WarmStart(tuple(first + picks), tuple(notes))


def plan(
    problem: Problem,
    entries: list[Entry],
    gpu: str,
    other_shapes_only: bool,
    workers: int,
    seed: int | None,
) -> WarmStart:
    family, shape = problem.family, problem.shape
    usable = usable_entries(entries, shape, other_shapes_only)
    notes = []
    if gpu:
        found = shipped.entries(family.origin or family.name, problem.arch.name)
        source = shipped.LABEL
        if not found and family.tuned_as:  # the same kernels on other types (matmul-f16 as matmul-bf16): its data
            found = shipped.entries(family.tuned_as, problem.arch.name)
            source = f"{family.tuned_as}'s trials in {shipped.LABEL}"
        held = {e.run.name for e in usable}  # runs the user imported from the shipped file are theirs already
        ours = [e for e in usable_entries(found, shape, other_shapes_only) if e.run.name not in held]
        if ours:
            whose = "the tuning database's trials with " if usable else "from "
            here = sum(e.run.gpu == gpu for e in ours)
            notes.append(f"warm start: {whose}{source} ({len(ours)} trials, {here} of them on this GPU)")
            usable = usable + ours
    if not usable:
        return cold_start(problem)
    near = nearest_seeds(problem, usable, gpu)
    rows = learned.training_rows(family, problem.arch, usable)
    plain = learned.fit(rows, with_census=False, seed=seed or 0)
    fresh, fresh_note = new_value_seeds(problem, usable, near, plain)
    shapes = len(measured_by_shape(usable))
    notes.append(f"warm start: {len(near)} config(s) from the nearest of {shapes} measured shape(s)")
    if fresh_note:
        notes.append(fresh_note)
    picks = family_seeds(problem, [s.config for s in near + fresh])
    notes += picks_note(picks)
    taken = [s.config for s in near + fresh + picks]
    modelled, note, model = model_seeds(problem, rows, plain, taken, workers, seed or 0)
    notes.append(note)
    return WarmStart(tuple(near + fresh + picks + modelled), tuple(notes), model)
