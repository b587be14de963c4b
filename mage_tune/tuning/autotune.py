"""A Triton autotune that remembers: `@mage_tune.autotune(configs=[triton.Config(...), ...], key=["N"])` above
`@triton.jit`, answered from the tuning database. docs/autotune.md is the guide; in short, for each new key (the
named arguments' values and the tensors' dtypes, as Triton's autotune keys):

1. **database**: the fastest of `configs` measured at exactly this shape on this GPU and arch;
2. **nearest**: else the fastest of `configs` measured at the nearest measured shape (tuning.choice's rule:
   Euclidean distance over log2 of each dimension), on this GPU and arch;
3. **benchmark**: else every config is launched, checked and timed, the trials are recorded in the database as a
   measured run (so the next process answers from it), and the fastest runs.

A key answered once costs a dict lookup for the rest of the process. Whose rows answer is the kernel's identity:

* with `family=` (a Triton family file, `path/family.py[:NAME]`, or a built-in name): that family's rows, the ones
  `mage-tune search path/family.py` writes (its name and origin, its dimensions read from the call's arguments, its
  knobs as the configs' keys); an unknown key is measured by mage-tune's isolated harness (a worker process, each
  config checked against the family's float64 reference, then timed cold) on the family's inputs at that shape;
* without: rows named after the kernel (`name=`, default the function's name, with the tensors' dtypes), the shape
  being the key's integer arguments; an unknown key is measured in this process on clones of the caller's tensors
  (tuning/autotune_bench.py: the configs' results checked against each other, each timed as the harness times).

Nothing here imports triton, torch or cupy at the top: a decorated kernel's module has imported triton already, and
torch loads on first use through mage_tune.gpu.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mage_tune import gpu, measure, toolchain
from mage_tune.arch import get_arch
from mage_tune.census import census_variant
from mage_tune.census.features import features
from mage_tune.errors import ConfigError, InputError, MageError, MeasureError
from mage_tune.kernels.base import OUT, Family
from mage_tune.kernels.recorded import family_digest
from mage_tune.kernels.registry import load_family, looks_like_path, split_family_spec
from mage_tune.kernels.triton_family import LAUNCH_OPTIONS, TritonFamily
from mage_tune.problem import Problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE
from mage_tune.storage import check_url, redact, sqlite_url
from mage_tune.tuning import autotune_bench
from mage_tune.tuning.choice import as_measured, distance2, shape_key, shape_text
from mage_tune.tuning.db import Entry, Recorder, RunInfo, TuningDB, default_url, local_file, run_name, versions

__all__ = ["BENCHMARK", "DATABASE", "NEAREST", "ONLY", "Answer", "RememberingAutotuner", "Trial", "autotune"]

DATABASE = "database"  # measured at exactly this shape
NEAREST = "nearest"  # measured at the nearest measured shape
BENCHMARK = "benchmark"  # measured now, by this process
ONLY = "only config"  # one config: nothing to choose (as Triton's autotune)
SOURCE = "autotune"  # the `source` of the trials a benchmark records
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3, "num_ctas": 1}  # what Triton launches a config without them at
PROBES = (48, 80, 112, 176, 208, 272, 304, 368, 464, 496)  # distinct sizes that tell a family's dimensions apart
ROUNDS = 7  # graph replays per config (the harness's default)


@dataclass(frozen=True)
class Identity:
    """Whose rows answer a key: the name and origin runs are recorded under, the shape, and the family (None for a
    bare kernel, whose rows are its own)."""

    name: str
    origin: str
    shape: dict
    family: Family | None = None
    digest: str = ""
    where: str = ""


@dataclass(frozen=True)
class Trial:
    """One config benchmarked: `index` into the decorator's configs, the config as recorded, its time (None:
    failed, `error` says why) and the launches its timing made."""

    index: int
    config: dict
    time_us: float | None
    error: str = ""
    launches: int = 0
    census: dict = field(default_factory=dict)
    pruned: bool = False  # not valid at the shape (the family's constraints): never built

    @property
    def outcome(self) -> str:
        return "pruned" if self.pruned else "failed" if self.time_us is None else "measured"


@dataclass(frozen=True)
class Answer:
    """The config a key runs, and why."""

    config: object  # the triton.Config
    index: int
    source: str  # DATABASE, NEAREST, BENCHMARK or ONLY
    shape: dict  # the shape the key was answered for
    measured_shape: dict | None = None
    time_us: float | None = None
    run: str = ""  # the run that measured it
    launch: dict = field(default_factory=dict)  # keyword arguments the launch adds: the config's, and a family's

    def __str__(self) -> str:
        timed = f", {self.time_us:.2f} µs" if self.time_us is not None else ""
        at = f" at {shape_text(self.measured_shape)}" if self.measured_shape and self.source == NEAREST else ""
        return f"{config_text(self.config)} [{self.source}{at}{timed}]"


def autotune(
    configs: Sequence,
    key: Sequence[str],
    *,
    family=None,
    db=None,
    name: str | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    rounds: int = ROUNDS,
):
    """Decorate a `@triton.jit` kernel (or a `@triton.heuristics` one) as `triton.autotune` would, answering each key
    from the tuning database first (module docstring).

    `family`: a family file `path/family.py[:NAME]`, a built-in name, a Family found by the registry, or a sequence
    of them (the one whose dtypes match the call's tensors answers). `db`: a URL, a SQLite file, a TuningDB, None
    (the default database: $MAGE_TUNE_DB or the cache's) or "off" (this process only). `name`: the rows' name
    without a family. `reset_to_zero`, `restore_value`: as Triton's, the arguments a benchmark zeroes or restores
    before every launch it times. `rounds`: graph replays per config timed."""

    def decorate(fn):
        return RememberingAutotuner(fn, configs, key, family, db, name, reset_to_zero, restore_value, rounds)

    return decorate


class RememberingAutotuner:
    """A kernel launched as `kernel[grid](*args)`, each key's config answered from the tuning database, else
    benchmarked and recorded. Counters for whoever checks it: `timed_launches` (launches the benchmarks of this
    process timed), `benchmarked_keys` (the keys it benchmarked, in order), `answered_from` (key -> DATABASE,
    NEAREST, BENCHMARK or ONLY) and `answers` (key -> Answer)."""

    def __init__(self, fn, configs, key, family=None, db=None, name=None, reset_to_zero=None, restore_value=None,
                 rounds: int = ROUNDS):  # fmt: skip
        self.fn = fn
        self.configs = list(configs)
        if not self.configs:
            raise InputError(f"autotune of {_fn_name(fn)}: configs is empty")
        self.arg_names = list(getattr(fn, "arg_names", None) or [])
        self.keys = list(key)
        self.reset_to_zero = list(reset_to_zero or ())
        self.restore_value = list(restore_value or ())
        for what, names in (("key", self.keys), ("reset_to_zero", self.reset_to_zero),
                            ("restore_value", self.restore_value)):  # fmt: skip
            unknown = [n for n in names if n not in self.arg_names]
            if unknown:
                raise InputError(
                    f"autotune of {_fn_name(fn)}: {what} names {', '.join(unknown)}, not arguments of the kernel "
                    f"({', '.join(self.arg_names)})"
                )
        self.name = name or _fn_name(fn)
        # what can be told without a GPU is checked here, at decoration, not at the first launch
        for i, config in enumerate(self.configs):
            if not isinstance(getattr(config, "kwargs", None), dict):
                raise InputError(f"autotune of {self.name}: configs[{i}] is {config!r}, not a triton.Config")
        if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 1:
            raise InputError(f"autotune of {self.name}: rounds must be a whole number of replays, at least 1; "
                             f"got {rounds!r}")  # fmt: skip
        if db is not None and not isinstance(db, TuningDB) and db != "off":
            if not isinstance(db, str | os.PathLike):
                raise InputError(f"autotune of {self.name}: db is {db!r}: a URL, a SQLite file, a TuningDB, None "
                                 'or "off"')  # fmt: skip
            check_url(_url(db))  # a URL no installed driver serves, another application's SQLite file
        self.family_specs = _specs(family)
        for spec in self.family_specs:
            _check_family_spec(spec, self.name)
        self.db = db
        self.rounds = int(rounds)
        self.cache: dict[tuple, object] = {}  # key -> triton.Config, as Triton's Autotuner keeps it
        self.answers: dict[tuple, Answer] = {}
        self.answered_from: dict[tuple, str] = {}
        self.benchmarked_keys: list[tuple] = []
        self.timed_launches = 0
        self.best_config = None
        self._families: list[Family] | None = None
        self._readers: dict[tuple, list[Entry]] = {}  # (name, origin, gpu, arch) -> measured rows, read once
        self._devices: dict[int, tuple[str, str]] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"mage_tune.autotune({self.name}, {len(self.configs)} configs, key={self.keys})"

    # --- launching --------------------------------------------------------------------------------------------
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args, grid, warmup=False, **kwargs):
        bound = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        key = self.key_of(bound)
        answer = self.answers.get(key)
        if answer is None:
            with self._lock:
                answer = self.answers.get(key) or self._answer(key, bound, args, kwargs, grid)
        self.best_config = answer.config
        hook = getattr(answer.config, "pre_hook", None)
        if hook is not None:
            hook({**bound, **answer.launch})
        return self.fn.run(*args, grid=grid, warmup=warmup, **kwargs, **answer.launch)

    def key_of(self, bound: Mapping) -> tuple:
        """The key a call is answered per, as Triton's autotune makes it: the `key` arguments' values, then the
        dtype of every argument that has one."""
        values = [bound[k] for k in self.keys if k in bound]
        return tuple(values) + tuple(str(v.dtype) for v in bound.values() if hasattr(v, "dtype"))

    # --- answering a key --------------------------------------------------------------------------------------
    def _answer(self, key: tuple, bound: dict, args: tuple, kwargs: dict, grid) -> Answer:
        if len(self.configs) == 1:
            ident = self.identity(bound)
            answer = Answer(self.configs[0], 0, ONLY, ident.shape, launch=self._launch_kwargs(0, ident))
        else:
            ident = self.identity(bound)
            gpu_name, arch_name = self.device_of(bound)
            answer = self.lookup(ident, self.rows(ident, gpu_name, arch_name), arch_name)
            if answer is None:
                answer = self._benchmark(key, ident, gpu_name, arch_name, Call(args, kwargs, grid, bound))
        self.answers[key] = answer
        self.answered_from[key] = answer.source
        self.cache[key] = answer.config
        return answer

    def identity(self, bound: Mapping) -> Identity:
        """Whose rows answer this call, and its shape (module docstring)."""
        families = self.families()
        if not families:
            return self._bare_identity(bound)
        why = []
        for fam in families:
            problem = _dtype_problem(fam, self.arg_names, bound)
            if problem:
                why.append(f"{fam.name}: {problem}")
                continue
            shape = _shape_of(fam, self.arg_names, bound)
            return Identity(fam.name, fam.origin or fam.name, shape, fam, family_digest(fam), fam.origin)
        raise InputError(f"autotune of {self.name}: no family given fits the call ({'; '.join(why)})")

    def _bare_identity(self, bound: Mapping) -> Identity:
        shape, rest = {}, []
        for k in self.keys:
            value = bound.get(k)
            if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1:
                shape[k] = int(value)
            else:
                rest.append(f"{k}={value}")
        dtypes = [f"{n}:{_dtype_name(v.dtype)}" for n, v in bound.items() if hasattr(v, "dtype")]
        name = f"{self.name}[{','.join(dtypes + rest)}]"
        source = _source_of(self.fn)
        digest = hashlib.sha256(source.encode()).hexdigest() if source else ""
        return Identity(name, name, shape or {"key": 1}, None, digest, f"{self.name} (mage_tune.autotune)")

    def families(self) -> list[Family]:
        if self._families is None:
            found = []
            for spec in self.family_specs:
                fam = load_family(spec) if isinstance(spec, str) else spec
                if not isinstance(fam, Family):
                    raise InputError(f"autotune of {self.name}: family {spec!r} is not a mage_tune Family")
                if not fam.origin:
                    raise InputError(
                        f"autotune of {self.name}: family {fam.name} was not found by the registry: give its file "
                        "(path/family.py[:NAME]) or built-in name, which the measuring worker loads it by"
                    )
                _same_kernel(fam, self.fn, self.name)
                found.append(fam)
            self._families = found
        return self._families

    def device_of(self, bound: Mapping) -> tuple[str, str]:
        """(GPU name, arch name) of the device the call's tensors are on (the current device where none says)."""
        torch = gpu.torch()
        index = next(
            (v.device.index for v in bound.values() if getattr(getattr(v, "device", None), "type", "") == "cuda"),
            None,
        )
        index = gpu.current_device() if index is None else index
        if index not in self._devices:
            major, minor = torch.cuda.get_device_capability(index)
            self._devices[index] = (torch.cuda.get_device_name(index), f"sm_{major}{minor}")
        return self._devices[index]

    # --- the database -----------------------------------------------------------------------------------------
    def database(self, create: bool) -> TuningDB | None:
        """The tuning database (None: "off", or, to read, a local file not made yet)."""
        if isinstance(self.db, TuningDB):
            return self.db
        if self.db == "off":
            return None
        url = _url(self.db) if self.db is not None else default_url()
        path = local_file(url)
        if not create and path is not None and not path.exists():
            return None
        return TuningDB(url, create=create)

    def rows(self, ident: Identity, gpu_name: str, arch_name: str) -> list[Entry]:
        """The measured rows of this identity on this GPU and arch (read once per process)."""
        cached = (ident.name, ident.origin, gpu_name, arch_name)
        if cached not in self._readers:
            rows: list[Entry] = []
            try:
                db = self.database(create=False)
            except Exception as exc:  # the database is a convenience: an unreadable one is said, and benchmarked past
                _warn(f"the tuning database is not read ({type(exc).__name__}: {_first_line(exc)}); benchmarking")
                db = None
            # by origin first (the family file as found here), else by name (the same file found from elsewhere)
            for who in dict.fromkeys((ident.origin, ident.name)) if db is not None else ():
                rows = [
                    e
                    for e in db.entries(family=who, objective=MEASURED_OBJECTIVE)
                    if e.measured and e.run.gpu == gpu_name and e.run.arch in (arch_name, arch_name + "a")
                    and (ident.family is not None or e.run.family == ident.name)
                ]  # fmt: skip
                if rows:
                    break
            self._readers[cached] = rows
        return self._readers[cached]

    def lookup(self, ident: Identity, rows: list[Entry], arch_name: str) -> Answer | None:
        """The answer from measured rows (DATABASE, else NEAREST), or None: none of the configs was measured at
        a shape with these dimensions."""
        match = self._matcher(ident, arch_name)
        found = pick(rows, ident.shape, match)
        if found is None:
            return None
        index, e, source = found
        return Answer(
            self.configs[index], index, source, dict(ident.shape), dict(e.run.shape), e.value, e.run.name,
            self._launch_kwargs(index, ident),
        )  # fmt: skip

    def _matcher(self, ident: Identity, arch_name: str) -> Callable[[dict], int | None]:
        """A recorded config -> the index of the config it is among `configs` (None: not one of them)."""
        if ident.family is None:
            known = {_key(normalized(flat_config(c))): i for i, c in reversed(list(enumerate(self.configs)))}
            return lambda config: known.get(_key(normalized(config)))
        fam = ident.family
        problem = Problem(fam, ident.shape, get_arch(arch_name))  # a family's constraints need the arch's facts
        known = {}
        for i, c in reversed(list(enumerate(self.configs))):
            config = family_config(fam, c)
            if not problem.violations(config):
                known[_key(config)] = i

        def match(config: dict) -> int | None:
            full = as_measured(problem, config)
            return None if full is None else known.get(_key(full))

        return match

    # --- benchmarking -----------------------------------------------------------------------------------------
    def _benchmark(self, key: tuple, ident: Identity, gpu_name: str, arch_name: str, call: Call) -> Answer:
        trials = self.measure(ident, call, arch_name)
        self.benchmarked_keys.append(key)
        self.timed_launches += sum(t.launches for t in trials)
        measured = [t for t in trials if t.time_us is not None]
        run = self.record(ident, gpu_name, arch_name, trials)
        if not measured:
            why = "; ".join(f"{config_text(self.configs[t.index])}: {t.error}" for t in trials) or "no valid config"
            raise MeasureError(f"autotune of {self.name} at {shape_text(ident.shape)}: no config ran correctly ({why})")
        best = min(measured, key=lambda t: t.time_us)
        return Answer(
            self.configs[best.index], best.index, BENCHMARK, dict(ident.shape), dict(ident.shape), best.time_us,
            run, self._launch_kwargs(best.index, ident),
        )  # fmt: skip

    def measure(self, ident: Identity, call: Call, arch_name: str) -> list[Trial]:
        """Check and time every config at this call's key (the seam the CPU tests replace): through the family's
        isolated harness where there is a family, else in this process on clones of the call's tensors."""
        if ident.family is not None:
            return self._measure_family(ident, arch_name)
        timed = autotune_bench.measure(
            self.fn, [launch_kwargs(c) for c in self.configs], call.args, call.kwargs, call.grid, self.arg_names,
            reset_to_zero=self.reset_to_zero, restore_value=self.restore_value, rounds=self.rounds,
            hooks=[getattr(c, "pre_hook", None) for c in self.configs],
        )  # fmt: skip
        return [
            Trial(t.index, normalized(flat_config(self.configs[t.index])), t.time_us, t.error, t.launches)
            for t in timed
        ]

    def _measure_family(self, ident: Identity, arch_name: str) -> list[Trial]:
        fam = ident.family
        problem = Problem(fam, ident.shape, get_arch(arch_name))
        trials, built = [], []
        for index, c in enumerate(self.configs):
            config = family_config(fam, c)
            problems = problem.violations(config)
            if problems:
                trials.append(Trial(index, config, None, "; ".join(problems), pruned=True))
                continue
            try:
                variant = problem.build(config, checked=True)
            except MageError as exc:
                trials.append(Trial(index, config, None, str(exc)))
                continue
            built.append((index, config, variant))
        if not built:
            return trials
        done = measure.bench(problem, [v for *_, v in built], baselines=(), rounds=self.rounds, seed=0)
        for (index, config, variant), result in zip(built, done.results, strict=True):
            census = {}
            with contextlib.suppress(Exception):  # the census is the record's extra: never what fails a config
                census = features(census_variant(variant))
            launches = sum(t.launches_per_graph * t.rounds for t in result.timings) + (
                autotune_bench.SINGLE_REPEATS if result.single_launch_us is not None else 0
            )
            time_us = result.time("cold") if result.ok else None
            trials.append(Trial(index, config, time_us, result.error, launches, census))
        return sorted(trials, key=lambda t: t.index)

    def record(self, ident: Identity, gpu_name: str, arch_name: str, trials: list[Trial]) -> str:
        """The trials as a measured run in the database (and in this process's rows); its name ("" where none)."""
        run_id = uuid.uuid4().hex
        run = RunInfo(
            name=run_name(f"autotune {ident.name} {_shape_id(ident.shape)}", run_id),
            family=ident.name,
            origin=ident.origin,
            shape=dict(ident.shape),
            arch=arch_name,
            objective=MEASURED_OBJECTIVE,
            gpu=gpu_name,
            toolchain=_toolchain(),
            where=ident.where,
            run_id=run_id,
            family_digest=ident.digest,
            defaults=ident.family.with_defaults({}) if ident.family is not None else {},
        )
        for key, rows in self._readers.items():
            if key[0] == ident.name and key[2:] == (gpu_name, arch_name):
                rows.extend(
                    Entry(run, t.index, t.config, "measured", t.time_us, t.census, SOURCE)
                    for t in trials
                    if t.time_us is not None
                )
        if self.db == "off":
            return ""
        url = self.db.url if isinstance(self.db, TuningDB) else _url(self.db) if self.db is not None else default_url()
        recorder = Recorder(url, run)  # a database it cannot write is said once on stderr, never raised
        for number, t in enumerate(trials):
            recorder.trial(number, t.config, t.outcome, t.time_us, t.census, SOURCE)
        return "" if recorder.failed or recorder.study is None else run.name

    def _launch_kwargs(self, index: int, ident: Identity) -> dict:
        """What a launch of config `index` adds to the call: the config's constexprs and options, and a family's
        constexprs at the shape (as its harness launched them)."""
        c = self.configs[index]
        extra = launch_kwargs(c)
        if ident.family is not None and hasattr(ident.family, "constexprs"):
            extra.update(ident.family.constexprs(family_config(ident.family, c), ident.shape))
        return extra


@dataclass(frozen=True)
class Call:
    """One call of the kernel: its arguments as given, the grid, and the arguments by name."""

    args: tuple
    kwargs: dict
    grid: object
    bound: dict


# --- the choice ---------------------------------------------------------------------------------------------------


def pick(rows: list[Entry], shape: dict, match: Callable[[dict], int | None]) -> tuple[int, Entry, str] | None:
    """(config index, the row, DATABASE or NEAREST): the fastest row measured at `shape` whose config `match`
    finds among the configs, else the fastest such row at the nearest shape of the same dimensions; None where no
    row's config is among them."""
    groups: dict[str, list[Entry]] = {}
    for e in rows:
        if e.measured and set(e.run.shape) == set(shape):
            groups.setdefault(shape_key(e.run.shape), []).append(e)
    here = shape_key(shape)
    order = sorted(
        (k for k in groups if k != here),
        key=lambda k: (distance2(k, shape), tuple(json.loads(k)[d] for d in shape), k),
    )
    for k, source in [(here, DATABASE)] * (here in groups) + [(k, NEAREST) for k in order]:
        for e in sorted(groups[k], key=lambda e: e.value):
            index = match(e.config)
            if index is not None:
                return index, e, source
    return None


# --- configs ------------------------------------------------------------------------------------------------------


def flat_config(c) -> dict:
    """A triton.Config as one dict, as TritonFamily.autotune_configs flattens it: its kwargs, then each launch option
    it sets."""
    out = dict(c.kwargs)
    for option in LAUNCH_OPTIONS:
        value = getattr(c, option, None)
        if value is not None:
            out[option] = value
    return out


def normalized(config: Mapping) -> dict:
    """A flat config with the launch options Triton defaults to spelled out, so that two spellings of one launch
    compare equal (no num_warps is num_warps=4)."""
    return {**TRITON_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}


def family_config(fam: Family, c) -> dict:
    """A triton.Config as a config of `fam` (every knob): the knobs it sets, Triton's default for a launch option it
    leaves out, the knob's default for the rest. A launch option it sets that the family has no knob for, at other
    than Triton's default, is an InputError: the family's harness would launch something else."""
    flat = flat_config(c)
    knobs = {k.name: k for k in fam.knobs}
    for option in LAUNCH_OPTIONS:
        if option in flat and option not in knobs and flat[option] != TRITON_DEFAULTS.get(option):
            raise InputError(f"{config_text(c)} sets {option}={flat[option]}, which family {fam.name} has no knob for")
    defaults = {name: TRITON_DEFAULTS.get(name, knob.domain[0]) if name in LAUNCH_OPTIONS else knob.domain[0]
                for name, knob in knobs.items()}  # fmt: skip
    return {name: flat.get(name, default) for name, default in defaults.items()}


def launch_kwargs(c) -> dict:
    """The keyword arguments a launch of triton.Config `c` adds, as Triton's autotune passes them."""
    if hasattr(c, "all_kwargs"):
        return dict(c.all_kwargs())
    return flat_config(c)


def config_text(c) -> str:
    config = flat_config(c) if hasattr(c, "kwargs") else dict(c)
    return "triton.Config(" + ", ".join(f"{k}={v}" for k, v in config.items()) + ")"


def _key(config: Mapping) -> str:
    return json.dumps(dict(config), sort_keys=True, default=str)


# --- a family's view of a call ------------------------------------------------------------------------------------


def _shape_of(fam: Family, arg_names: list[str], bound: Mapping) -> dict:
    """The family's shape of a call: each dimension read from the argument (and axis) that carries it, found once
    by probing the family with distinct sizes (make_inputs, output shapes, scalars)."""
    where = _dims_in_args(fam, tuple(arg_names))
    shape = {}
    for dim in fam.dims:
        if dim in where:
            arg, axis = where[dim]
            value = bound[arg]
            shape[dim] = int(value.shape[axis]) if axis is not None else int(value)
        elif dim in fam.default_dims:
            shape[dim] = int(fam.default_dims[dim])
        else:
            raise InputError(f"{fam.name}: no argument of the kernel carries the dimension {dim}")
    return shape


_PROBED: dict[tuple, dict] = {}


def _dims_in_args(fam: Family, arg_names: tuple[str, ...]) -> dict[str, tuple[str, int | None]]:
    cached = (id(fam), arg_names)
    if cached in _PROBED:
        return _PROBED[cached]
    if len(fam.dims) > len(PROBES):
        raise InputError(f"{fam.name}: more dimensions than mage_tune.autotune tells apart ({len(PROBES)})")
    probe = {d: PROBES[i] for i, d in enumerate(fam.dims)}
    sizes = {name: tuple(array.shape) for name, array in _buffers(fam, probe).items()}
    where: dict[str, tuple[str, int | None]] = {}
    for arg in arg_names:
        for axis, size in enumerate(sizes.get(arg, ())):
            for dim, p in probe.items():
                if size == p:
                    where.setdefault(dim, (arg, axis))
    scalars = getattr(fam, "scalars", None)
    for arg, value in (scalars(probe) if callable(scalars) else {}).items():
        for dim, p in probe.items():
            if arg in arg_names and isinstance(value, int) and value == p:
                where.setdefault(dim, (arg, None))
    _PROBED[cached] = where
    return where


def _buffers(fam: Family, probe: dict) -> dict:
    """The family's buffers at the probe shape by kernel argument name: inputs, then outputs (the one output of a
    Triton family without `outputs` under its `output` argument)."""
    try:
        found = dict(fam.make_inputs(probe, np.random.default_rng(0)))
        for name, dims in fam.output_shapes(probe).items():
            arg = getattr(fam, "output", name) if name == OUT else name
            found.setdefault(arg, np.empty(dims, dtype=np.uint8))
    except Exception as exc:
        raise InputError(
            f"{fam.name}: cannot tell which argument carries which dimension (its buffers at "
            f"{shape_text(probe)}: {type(exc).__name__}: {exc})"
        ) from None
    return found


def _dtype_problem(fam: Family, arg_names: list[str], bound: Mapping) -> str:
    """Why the call's tensors are not the family's dtypes ("" when they are)."""
    probe = {d: PROBES[i] for i, d in enumerate(fam.dims)}
    output = getattr(fam, "output", None)
    for arg in _buffers(fam, probe):
        value = bound.get(arg)
        if arg not in arg_names or not hasattr(value, "dtype"):
            continue
        buffer = OUT if arg == output and not fam.outputs else arg
        want, got = fam.device_dtype(buffer), _dtype_name(value.dtype)
        if want != got:
            return f"{arg} is {got}, the family's is {want}"
    return ""


def _same_kernel(fam: Family, fn, name: str) -> None:
    """A family of another kernel would answer with another kernel's rows: refused where both sources are known."""
    theirs = None
    with contextlib.suppress(MageError):
        theirs = getattr(fam, "jit_function", None)
    mine, other = _source_of(fn), _source_of(theirs)
    if mine and other and mine != other:
        raise InputError(f"autotune of {name}: family {fam.name} is for another kernel ({_fn_name(theirs)})")


# --- small things -------------------------------------------------------------------------------------------------


def _specs(family) -> list:
    if family is None:
        return []
    if isinstance(family, str | Family):
        return [family]
    return list(family)


def _check_family_spec(spec, name: str) -> None:
    """What can be told of a family at decoration without importing a family file (which may import the very module
    being decorated): a name is a known one, and a Triton family (a CUDA template has no kernel to remember for);
    a path is an existing .py file."""
    if not isinstance(spec, str):
        return
    if looks_like_path(spec):
        path = Path(split_family_spec(spec)[0])
        if path.suffix != ".py" or not path.is_file():
            raise InputError(f"autotune of {name}: family {spec!r}: no such family file (path/family.py[:NAME])")
        return
    try:
        fam = load_family(spec)  # a name: a built-in or an installed plug-in
    except ConfigError as exc:
        raise ConfigError(f"autotune of {name}: {exc}") from None
    if not isinstance(fam, TritonFamily):
        raise InputError(
            f"autotune of {name}: family {spec!r} is a CUDA template family; autotune remembers Triton kernels (give "
            "a Triton family, path/family.py[:NAME])"
        )


def _url(db) -> str:
    text = str(db)
    if isinstance(db, os.PathLike) or ("://" not in text and not text.startswith("journal:")):
        return sqlite_url(Path(text))
    return text


def _fn_name(fn) -> str:
    while not hasattr(fn, "__name__") and hasattr(fn, "fn"):
        fn = fn.fn
    return getattr(fn, "__name__", type(fn).__name__)


def _source_of(fn) -> str:
    while fn is not None and not hasattr(fn, "src") and hasattr(fn, "fn"):
        fn = fn.fn
    src = getattr(fn, "src", "")
    return src if isinstance(src, str) else ""


def _warn(text: str) -> None:
    print(f"mage-tune: warning: mage_tune.autotune: {text}", file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    return redact((str(exc).strip().splitlines() or [""])[0])[:200]


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _shape_id(shape: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in shape.items())


def _toolchain() -> dict:
    found = versions(toolchain.fingerprint())
    with contextlib.suppress(Exception):
        import triton  # the decorated kernel's module has imported it

        found["triton"] = triton.__version__
    return found
