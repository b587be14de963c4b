"""The config to run at a shape, from what was measured: `mage_tune.load(family).choice(shape)`.

For a family, a shape, a GPU and an arch, the first of:

1. **measured here**: the fastest measured config at exactly this shape on this GPU;
2. **nearest measured shape**: the fastest config of the nearest shape measured (on this GPU or another) that is
   valid at this shape (family.violations); nearest is the Euclidean distance over the shape's dimensions on log2 of
   each (the warm start's rule, tuning.db.shape_distance), another GPU's shapes counted as one dimension twice or
   half as long further (tuning.db.gpu_distance: this GPU's shape first where both measured it), ties to the
   shape first by its dimensions in the family's order (as the exports' tables sort);
3. **model**: where no measured config is valid here, the learned time model (tuning/learned.py, fitted on the
   same trials, every GPU's, when there are enough) ranks a sample of valid configs and its fastest is taken;
4. **default**: the family's default config at this shape.

A family tuned as another (Family.tuned_as: a fused variant with the other's knobs, such as embedding-layernorm of
layernorm) that has no trials of its own takes the other family's choice at the other's dimensions of the shape,
where that config is valid here ("layernorm's measured here", ...), before its own model and default.

The trials are the user's tuning database first, then the shipped data (tuning/shipped.py: H200 and H100): per
GPU and shape, the database's trials where it has them, else the shipped ones. A pick from another GPU's trials says
so ("nearest measured shape … on GPU", an exact shape measured there included). Without a GPU the answer is for the
GPU and arch given, else this machine's GPU, else those the data holds most trials of.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from mage_tune.arch import Arch, get_arch
from mage_tune.kernels import registry
from mage_tune.kernels.base import Config, Family, Launch, Shape
from mage_tune.measure import device
from mage_tune.problem import Problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.storage import redact
from mage_tune.tuning import learned, shipped
from mage_tune.tuning.db import Entry, TuningDB, gpu_distance, measured_by_gpu_and_shape
from mage_tune.tuning.warm import random_valid

MEASURED_HERE = "measured here"
MODEL = "model"
DEFAULT = "default"
DATABASE = "tuning database"
MODEL_POOL = 3000  # valid configs the model ranks (as the warm start's)

Measured = tuple[str, str]  # a GPU and a shape (as JSON) measured on it


@dataclass(frozen=True)
class Choice:
    """The config chosen for one shape, where it came from, and how it launches there."""

    family: str
    shape: Shape
    gpu: str  # "" where neither the caller, this machine nor the data names one
    arch: str  # the arch's name, as records keep it
    config: Config
    source: str  # "measured here", "nearest measured shape m=…,d=…[ on GPU]", "model" or "default"
    data: str  # "tuning database", "the shipped tuning data", both (the model's) or "" (default)
    launch: Launch  # grid, block and dynamic shared memory at this shape
    time_us: float | None = None  # the config's measured time at `measured_shape` (measured and nearest only)
    measured_shape: Shape | None = None
    run: str = ""  # the run that measured it

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "shape": self.shape,
            "gpu": self.gpu,
            "arch": self.arch,
            "config": self.config,
            "source": self.source,
            "data": self.data,
            "grid": list(self.launch.grid),
            "block": list(self.launch.block),
            "dynamic_shared": self.launch.dynamic_shared,
            "time_us": self.time_us,
            "measured_shape": self.measured_shape,
            "run": self.run,
        }

    def __str__(self) -> str:
        config = ",".join(f"{k}={v}" for k, v in self.config.items())
        timed = f", {self.time_us:.2f} µs" if self.time_us is not None else ""
        whence = f" ({self.data}{timed})" if self.data else ""
        return f"{self.family} {shape_text(self.shape)}: {config} [{self.source}{whence}]"


def shape_text(shape: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def shape_key(shape: Mapping[str, int]) -> str:
    return json.dumps(dict(shape), sort_keys=True)


class TunedKernel:
    """A family with its tuning data: `choice(shape)` says which config to run at a shape, and why. Launching on
    tensors (the GPU side) builds on the same object; nothing here needs a GPU or a GPU library."""

    def __init__(self, family: Family, db: str | TuningDB | None = None, use_shipped: bool = True):
        """`db`: a TuningDB, a URL, None (the default database: $MAGE_TUNE_DB or the cache's; none yet reads as
        empty) or "off" (no database: the shipped data and defaults only). `use_shipped` False leaves the shipped
        data out."""
        self.family = family
        self.use_shipped = use_shipped
        if isinstance(db, TuningDB) or db == "off":
            self.db = None if db == "off" else db
        else:
            self.db = TuningDB(db, create=False)
        self._user: list[Entry] | None = None
        self._shipped: list[Entry] | None = None
        self._choices: dict[tuple, Choice] = {}
        self._models: dict[tuple, learned.TimeModel | None] = {}
        self._tuned_as: TunedKernel | None = None  # the family's Family.tuned_as, with the same data

    def __repr__(self) -> str:
        where = redact(self.db.url) if self.db else "no database"
        return f"TunedKernel({self.family.origin or self.family.name!r}, {where}, shipped={self.use_shipped})"

    # --- the data -------------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the tuning data again at the next choice (a search has added to it meanwhile)."""
        self._user = self._shipped = None
        self._tuned_as = None
        self._choices.clear()
        self._models.clear()

    def user_entries(self) -> list[Entry]:
        """The database's measured trials of this family (by origin, else by name: a family file found elsewhere)."""
        if self._user is None:
            self._user = []
            if self.db is not None:
                origin = self.family.origin or self.family.name
                self._user = [e for e in self.db.entries(family=origin, objective=MEASURED_OBJECTIVE) if e.measured]
                if not self._user and origin != self.family.name:
                    rows = self.db.entries(family=self.family.name, objective=MEASURED_OBJECTIVE)
                    self._user = [e for e in rows if e.measured]
        return self._user

    def shipped_entries(self) -> list[Entry]:
        """The shipped trials of this family: only a family found under the name they were made by (a built-in)."""
        if self._shipped is None:
            origin = self.family.origin or self.family.name
            self._shipped = shipped.entries(origin) if self.use_shipped else []
        return self._shipped

    def context(
        self, gpu: str | None = None, arch: str | Arch | None = None, this_machine: bool = True
    ) -> tuple[str, Arch]:
        """The GPU and arch a choice is for: those given, else this machine's GPU (unless `this_machine` is False),
        else those the data (the database's, else the shipped) holds most measured trials of."""
        arch = get_arch(arch) if arch else None  # a caller's arch name becomes an Arch here, once
        if this_machine and (gpu is None or arch is None) and device.has_gpu():
            here = (device.gpu_name(), self.family.target_arch(device.arch_of_device()))
            if here[0] and gpu in (None, here[0]) and arch in (None, here[1]):
                return here
        data = self.user_entries() or self.shipped_entries()
        if arch is None:
            on_gpu = [e.run.arch for e in data if gpu is None or e.run.gpu == gpu] or [e.run.arch for e in data]
            most = _most_common(on_gpu)
            arch = get_arch(most) if most else self.family.default_target()
        if gpu is None:
            gpu = _most_common([e.run.gpu for e in data if e.run.arch == arch.name]) or ""
        return gpu, arch

    # --- the choice -----------------------------------------------------------------------------------------------
    def choice(self, shape: Mapping[str, int], gpu: str | None = None, arch: str | Arch | None = None) -> Choice:
        """The config to run at `shape` (the family's dimensions; those with defaults may be left out) on `gpu`
        and `arch` (module docstring)."""
        shape = self.family.shape_from(dict(shape))
        gpu, arch = self.context(gpu, arch)
        key = (shape_key(shape), gpu, arch.name)
        if key not in self._choices:
            self._choices[key] = self._choose(Problem(self.family, shape, arch), gpu)
        return self._choices[key]

    def measured_shapes(self, gpu: str, arch: Arch) -> list[Shape]:
        """The shapes measured on `gpu` (the data's rule above) and `arch`, sorted as the nearest's ties are: what
        an export tables."""
        groups, _ = self._groups(arch, None)
        return [json.loads(k) for k in sorted((k for g, k in groups if g == gpu), key=self._order)]

    def _order(self, key: str) -> tuple[tuple[int, ...], str]:
        """How measured shapes sort: by their dimensions in the family's order (then as JSON)."""
        shape = json.loads(key)
        return tuple(shape.get(d, 0) for d in self.family.dims), key

    def ranked(self, shape: Shape, gpu: str, arch: Arch) -> list[Entry]:
        """The trials measured at exactly `shape` on `gpu`, fastest first, one per config valid there."""
        groups, _ = self._groups(arch, shape)
        out, seen = [], []
        problem = Problem(self.family, shape, arch)
        for e in groups.get((gpu, shape_key(shape)), []):
            config = as_measured(problem, e.config)
            if config is not None and config not in seen:
                seen.append(config)
                out.append(Entry(e.run, e.number, config, e.outcome, e.value, e.census, e.source))
        return out

    def _groups(self, arch: Arch, shape: Shape | None) -> tuple[dict[Measured, list[Entry]], dict[Measured, str]]:
        """Measured trials by GPU and shape (fastest first) and the source of each group's: the database's where it
        measured that shape on that GPU, else the shipped data's."""
        user = [e for e in self.user_entries() if e.run.arch == arch.name]
        ship = [e for e in self.shipped_entries() if e.run.arch == arch.name]
        if shape is not None:
            user = [e for e in user if set(e.run.shape) == set(shape)]
            ship = [e for e in ship if set(e.run.shape) == set(shape)]
        groups: dict[Measured, list[Entry]] = {}
        whence: dict[Measured, str] = {}
        for label, rows in ((shipped.LABEL, ship), (DATABASE, user)):  # the database's last: it wins a shape
            for k, group in measured_by_gpu_and_shape(rows).items():
                groups[k], whence[k] = group, label
        return groups, whence

    def _choose(self, problem: Problem, gpu: str) -> Choice:
        if self.family.tuned_as and not (self.user_entries() or self.shipped_entries()):
            borrowed = self._borrowed(problem, gpu)
            if borrowed is not None:
                return borrowed
        family, shape = self.family, problem.shape
        groups, whence = self._groups(problem.arch, shape)
        here = (gpu, shape_key(shape))
        if here in groups:
            for e in groups[here]:
                config = as_measured(problem, e.config)
                if config is not None:
                    return self._made(problem, gpu, config, MEASURED_HERE, whence[here], e)
        others = sorted(
            (k for k in groups if k != here),
            key=lambda k: (
                distance2(k[1], shape) + gpu_distance(k[0], gpu) ** 2,
                k[0] != gpu,
                *self._order(k[1]),
                whence[k] != DATABASE,  # one shape on two other GPUs: the user's measurement before the shipped one
                k[0],
            ),
        )
        for k in others:
            for e in groups[k]:
                config = as_measured(problem, e.config)
                if config is not None:
                    source = f"nearest measured shape {shape_text(_in_order(e.run.shape, family))}"
                    if e.run.gpu != gpu:
                        source += f" on {e.run.gpu or 'an unnamed GPU'}"
                    return self._made(problem, gpu, config, source, whence[k], e)
        rows = [e for group in groups.values() for e in group]
        picked = self._model_pick(problem, gpu, rows)
        if picked is not None:
            data = " and ".join(sorted({whence[k] for k in groups}, key=lambda w: w != DATABASE))
            return self._made(problem, gpu, picked, MODEL, data, None)
        return self._made(problem, gpu, family.default_config(shape, problem.arch), DEFAULT, "", None)

    def _borrowed(self, problem: Problem, gpu: str) -> Choice | None:
        """The choice of the family this one is tuned as (Family.tuned_as), at its dims of the shape, where that
        config is valid here; None where it is not (or the other family chose only its default)."""
        if self._tuned_as is None:
            other = registry.load_family(self.family.tuned_as)
            self._tuned_as = TunedKernel(other, self.db if self.db is not None else "off", self.use_shipped)
        other = self._tuned_as
        theirs = other.choice({d: problem.shape[d] for d in other.family.dims if d in problem.shape}, gpu, problem.arch)
        config = as_measured(problem, theirs.config)
        if config is None or theirs.source == DEFAULT:
            return None
        made = self._made(problem, gpu, config, f"{other.family.name}'s {theirs.source}", theirs.data, None)
        return dataclasses.replace(made, time_us=theirs.time_us, measured_shape=theirs.measured_shape, run=theirs.run)

    def _model_pick(self, problem: Problem, gpu: str, rows: list[Entry]) -> Config | None:
        """The model's fastest of a sample of valid configs; None where no model can be fitted (too few trials)."""
        if not rows:
            return None
        key = (gpu, problem.arch.name, tuple(sorted(problem.shape)))
        if key not in self._models:
            rows = learned.training_rows(self.family, problem.arch, rows)
            self._models[key] = learned.fit(rows, with_census=False)
        model = self._models[key]
        if model is None:
            return None
        pool = random_valid(problem, MODEL_POOL, 0)
        if not pool:
            return None
        scores = model.predict([learned.features(problem, c, None) for c in pool])
        return pool[min(range(len(pool)), key=lambda i: scores[i])]

    def _made(self, problem: Problem, gpu: str, config: Config, source: str, data: str, e: Entry | None) -> Choice:
        return Choice(
            family=self.family.name,
            shape=dict(problem.shape),
            gpu=gpu,
            arch=problem.arch.name,
            config=dict(config),
            source=source,
            data=data,
            launch=self.family.launch(config, problem.shape, problem.arch),
            time_us=e.value if e else None,
            measured_shape=dict(e.run.shape) if e else None,
            run=e.run.name if e else "",
        )


def distance2(measured: str, shape: Shape) -> float:
    """The squared distance of a measured shape (as JSON) from `shape` (same dimensions): the sum over `shape`'s
    dimensions, in its order, of the squared difference of their log2 (tuning.db.shape_distance, squared; summed in
    the order the exports' dispatch sums, so both find the same nearest)."""
    other = json.loads(measured)
    return sum((math.log2(max(1, shape[d])) - math.log2(max(1, other[d]))) ** 2 for d in shape)


def as_measured(problem: Problem, config: Config) -> Config | None:
    """A recorded config as it ran (a knob it does not name was newer than the record: its default), if the family
    as it is now takes it at `shape`; None otherwise (a knob the family no longer has, a value out of its domain,
    a constraint broken here)."""
    if problem.family.value_problems(config):
        return None
    full = problem.family.with_defaults(config)
    return None if problem.violations(full) else full


def _in_order(shape: Mapping[str, int], family: Family) -> dict[str, int]:
    return {d: shape[d] for d in family.dims if d in shape} | {d: v for d, v in shape.items() if d not in family.dims}


def _most_common(values: list[str]) -> str | None:
    counted = Counter(values).most_common()
    if not counted:
        return None
    top = counted[0][1]
    return min(v for v, n in counted if n == top)  # ties to the first by name: the same answer every time
