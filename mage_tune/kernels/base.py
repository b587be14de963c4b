"""The contract every kernel family meets, and the machinery they share.

A *family* is a kernel and the space of its variants: a problem (its shape dimensions, inputs, float64 reference and
tolerance, bytes and flops moved), knobs with domains and constraints, a way to build any valid config into a
binary (a Jinja CUDA template, or a Triton kernel), its launch geometry, and the baselines it is timed against. A
family is a plug-in: a built-in name, a `path/to/family.py[:NAME]`, or an installed package's entry point in the
group `mage_tune.families` (registry.py finds it). Everything family-specific lives in the family; no other module
asks which family it holds.

Two bases implement the build: `CudaFamily` (below: a Jinja template anywhere on disk, compiled NVRTC → ptxas) and
`TritonFamily` (triton_family.py: configs of a user's `@triton.jit` kernel, compiled offline by Triton). Both are
importable from `mage_tune.families`, the module a family file imports.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

import jinja2
import numpy as np

from mage_tune.compile import Artifact, build_from_cu, check_arch
from mage_tune.errors import ConfigError, InputError

Config = dict[str, int | str]
Shape = dict[str, int]

MAX_DIM = 2**31 - 1  # kernels index with 32-bit ints; a larger dimension is refused where it enters
DEFAULT_MAX_ELEMENTS = 2**31 - 1  # largest buffer, in elements, a family accepts unless it says otherwise


@dataclass(frozen=True)
class Knob:
    name: str
    domain: tuple
    help: str
    free: bool = False  # no constraint reads it: every value is valid wherever the others are (enumeration skips it)

    def parse(self, text: str):
        for value in self.domain:
            if str(value) == text:
                return value
        raise ConfigError(f"knob {self.name}: {text!r} is not allowed; allowed: {', '.join(map(str, self.domain))}")


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: int
    dynamic_shared: int = 0


@dataclass(frozen=True)
class Baseline:
    """A kernel a family's variants are timed against: `kind` is the name `--baselines` selects it by ("triton",
    "torch", or the family's own); `config` is what the family's `launcher` needs to launch it."""

    label: str
    kind: str
    config: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class CompareFact:
    """A family's own row in `compare`: `key` and `value` go to the JSON, `label` and `text` to the table."""

    key: str
    label: str
    value: object
    text: str


@dataclass(frozen=True)
class Variant:
    """One built config: what census, bench and search pass around."""

    family: str
    config: Config
    shape: Shape
    arch: str
    source: str
    kernel_name: str
    param_names: tuple[str, ...]
    launch: Launch
    artifact: Artifact

    @property
    def block(self) -> int:
        return self.launch.block

    @property
    def label(self) -> str:
        return config_label(self.family, self.config)


def config_label(family: str, config: Config) -> str:
    return family + "[" + ",".join(f"{k}={v}" for k, v in config.items()) + "]"


def builtin_template_dir() -> Path:
    """kernels/templates/: installed as the package mage_tune.templates (pyproject's package-dir), or, when the
    checkout is merely on PYTHONPATH, found beside the package."""
    try:
        return Path(str(files("mage_tune.templates")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "kernels" / "templates"


@cache
def _environment(folder: str):
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,  # a missing variable is an error, never an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class Family(ABC):
    """A kernel family. Subclass `CudaFamily` or `TritonFamily` (which implement `build`) and give:

    Class attributes
      name          the family's name in tables, labels and run directories
      dims          the shape dimensions it takes, e.g. ("m", "d"); each becomes a CLI option (`--shape m=4096,d=768`,
                    and `--m`/`--d`/`--n`/`--k` where a dimension has that name)
      default_dims  values of dims a user may leave out
      dim_help      a few words per dimension for `--help` and `space`
      knobs         Knob(name, domain, help) each; the first value of a domain is its default
      baselines     kinds of baselines it is timed against by default ("triton", "torch", "copy")
      tolerance     largest accepted ||out - ref|| / ||ref|| against the float64 reference (tolerance_for(shape)
                    gives it per shape, where a family's error bound grows with the problem)
      mma_passes    tensor-core products issued per product of the problem (1; 3xTF32 issues 3): the static
                    model's tensor term charges them all
      serial_turns(config)  how many times one output tile waits for another block's part of it (serial split-K's
                    slices: split_k - 1; 0 by default): the static model charges each turn
      walk_steps(config, shape, blocks)  pieces of work the busiest block does one after another (a persistent
                    layer norm's row groups; 0 by default): the static model charges at least 3.5 µs a step
      copy_of       an input whose bytes equal the output's (layer norm's x): the same-bytes copy baseline
                    (x → out, timed exactly like the variants) then measures the floor at the shape; None if none
      max_elements  largest input or output, in elements: a larger shape is refused before anything is built

    Methods (abstract ones must be given)
      violations(config, shape, arch)   why a config cannot work (sentences); [] when it can
      constraint_text()                 the constraints, as sentences for `mage-tune space`
      launch(config, shape, arch)       Launch(grid, block, dynamic_shared) for the Arch named by `arch`
      build(config, shape, arch)        a Variant: the compiled binary and how to launch it (the bases do this)
      render(config, shape)             the source a config builds from (the bases do this)
      make_inputs(shape, rng)           host inputs as float32 numpy arrays, by parameter name
      reference(inputs, shape)          the output in float64, from the inputs as the device holds them
      output_shape(shape)               shape of the one output buffer
      bytes_moved(shape), flops(shape)  each input read once, each output written once; 2·M·N·K for a matmul
      device_dtype(name)                "float32" (default), "bfloat16" or "float16" for an input or "__out__"
      baseline_kernels(shape)           the Baselines it offers (kinds as in `baselines`, copies aside)
      launcher(job, shape)              GPU side, in the worker process: a callable(buffers) that launches a
                                        baseline of this family (or a variant, for families that launch their own)
                                        on torch's current stream; None lets the harness launch a variant's cubin
      reference_kernels(shape, arch, specialize)
                                        the Triton kernels `compare` puts beside a variant (compiled offline)
      compare_facts(census, config, shape, reference)
                                        its own rows for `compare` (CompareFact), e.g. passes over the row
      best_files(configs)               files the search writes beside its best kernel (e.g. a triton.Config list)
    """

    name: str
    dims: tuple[str, ...]
    default_dims: ClassVar[Mapping[str, int]] = {}
    dim_help: ClassVar[Mapping[str, str]] = {}
    knobs: tuple[Knob, ...]
    baselines: tuple[str, ...] = ()
    tolerance: float = 1e-5
    mma_passes: int = 1
    copy_of: str | None = None
    max_elements: int = DEFAULT_MAX_ELEMENTS
    origin: str = ""  # how the registry found it (a built-in name, path.py:NAME, or entry-point name); set there

    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "dims", "knobs")

    # --- the space ---------------------------------------------------------------------------------------------
    @abstractmethod
    def violations(self, config: Config, shape: Shape, arch: str) -> list[str]:
        """Why a config cannot work for this shape and arch; empty when it can."""

    @abstractmethod
    def constraint_text(self) -> list[str]:
        """The constraints, as sentences for `mage-tune space`."""

    @abstractmethod
    def launch(self, config: Config, shape: Shape, arch: str) -> Launch: ...

    @abstractmethod
    def build(self, config: Config, shape: Shape, arch: str) -> Variant: ...

    @abstractmethod
    def render(self, config: Config, shape: Shape) -> str:
        """The source a config builds from, as text for a person (`mage-tune render`)."""

    # --- correctness and cost ---------------------------------------------------------------------------------
    @abstractmethod
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        """The output in float64."""

    @abstractmethod
    def output_shape(self, shape: Shape) -> tuple[int, ...]: ...

    @abstractmethod
    def bytes_moved(self, shape: Shape) -> int:
        """Each input read once, each output written once."""

    def flops(self, shape: Shape) -> int:
        return 0

    def serial_turns(self, config: Config) -> int:
        """Turns one output tile waits, in order, for other blocks' parts (0: every block writes its own)."""
        return 0

    def walk_steps(self, config: Config, shape: Shape, blocks: int) -> int:
        """Pieces of work the busiest of `blocks` blocks does one after another, each a dependent round trip to
        memory (a persistent kernel's walk; 0: every block does one piece)."""
        return 0

    def walk_twin(self, config: Config) -> Config | None:
        """For a config whose blocks walk their work (walk_steps > 0): the config that does the same work a piece per
        block, so that its census counts every load a piece runs; a loop's loads are counted once, so the static
        model charges a walking kernel at least its twin's time. None: no twin."""
        return None

    def tolerance_for(self, shape: Shape) -> float:
        """The largest accepted relative error at `shape`: `tolerance` unless a family's bound depends on the shape."""
        return self.tolerance

    def device_dtype(self, name: str) -> str:
        """The dtype the device holds input `name` (or the output, "__out__") in."""
        return "float32"

    # --- baselines and comparison (optional) ------------------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        return []

    def launcher(self, job, shape: Shape) -> Callable[[dict], object] | None:
        """GPU side: a callable(buffers) launching `job` (a Baseline-like record: label, kind, config), or None."""
        return None

    def reference_kernels(self, shape: Shape, arch: str, specialize: bool = True, **options) -> list:
        """Triton kernels (mage_tune.triton_ref.TritonKernel) that `compare` puts beside a variant."""
        return []

    def compare_facts(self, census, config: dict, shape: Shape, reference: bool) -> list[CompareFact]:
        return []

    compare_note: str = ""  # a sentence printed under `compare`'s table, explaining compare_facts

    def reference_configs(self) -> list[dict]:
        """Configs of the reference kernel that `compare --config INDEX` picks from (one kernel: [])."""
        return []

    def best_files(self, configs: list[Config]) -> dict[str, str]:
        return {}

    # --- shared machinery -------------------------------------------------------------------------------------
    def missing_members(self) -> list[str]:
        """Contract attributes this family left out (a class missing abstract methods cannot be instantiated:
        Python names those)."""
        return [attr for attr in self._REQUIRED if not hasattr(self, attr)]

    def shape_from(self, given: Mapping[str, int | None] | None = None, **more: int | None) -> Shape:
        """The family's dims from `given` and `more` (CLI options, --shape), defaults filled, each checked."""
        given = {**(given or {}), **more}
        unknown = [k for k, v in given.items() if v is not None and k not in self.dims]
        if unknown:
            raise ConfigError(
                f"{self.name} takes the dimensions {', '.join(self.dims)}; not {', '.join(sorted(unknown))}"
            )
        shape = {}
        for dim in self.dims:
            value = given.get(dim)
            if value is None:
                value = self.default_dims.get(dim)
            if value is None:
                raise ConfigError(f"{self.name} needs --{dim} (or --shape {dim}=...)")
            if not 1 <= value <= MAX_DIM:
                raise ConfigError(f"--{dim} must be between 1 and {MAX_DIM}, got {value}")
            shape[dim] = int(value)
        self.check_shape(shape)
        return shape

    def check_shape(self, shape: Shape) -> None:
        """Refuse a shape whose buffers exceed max_elements (32-bit indexing, memory) before anything is built."""
        biggest = int(np.prod(self.output_shape(shape), dtype=object))
        if biggest > self.max_elements:
            raise ConfigError(
                f"{self.name} {shape}: the output would hold {biggest} elements, over this family's limit of "
                f"{self.max_elements}"
            )

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise ConfigError(f"unknown knob {name!r} for {self.name}; knobs: {', '.join(k.name for k in self.knobs)}")

    def defaults(self) -> Config:
        return {k.name: k.domain[0] for k in self.knobs}

    def configs(self, shape: Shape, arch: str) -> Iterator[Config]:
        """Every valid config, in a fixed order. Constraints are checked once per combination of the constrained knobs;
        free knobs (which no constraint reads) then take each of their values."""
        free = [k for k in self.knobs if k.free]
        for values in self.bound_combinations(shape, arch):
            for rest in itertools.product(*(k.domain for k in free)):
                yield self.join_combination(values, rest)

    def bound_combinations(self, shape: Shape, arch: str) -> Iterator[tuple]:
        """The valid value tuples of the constrained knobs (in knob order), each valid with any values of the free
        ones: the space is these times the free knobs' product, which a sampler can index without listing it."""
        bound = [k for k in self.knobs if not k.free]
        firsts = {k.name: k.domain[0] for k in self.knobs if k.free}
        for values in itertools.product(*(k.domain for k in bound)):
            if not self.violations({**dict(zip((k.name for k in bound), values, strict=True)), **firsts}, shape, arch):
                yield values

    def count_configs(self, shape: Shape, arch: str) -> int:
        """How many configs are valid, without building them."""
        free = math.prod(len(k.domain) for k in self.knobs if k.free)
        return free * sum(1 for _ in self.bound_combinations(shape, arch))

    def join_combination(self, bound_values: tuple, free_values: tuple) -> Config:
        """The config of one valid tuple of the constrained knobs and one tuple of the free knobs' values."""
        bound = iter(bound_values)
        free = iter(free_values)
        return {k.name: next(free) if k.free else next(bound) for k in self.knobs}

    def space_size(self) -> int:
        size = 1
        for knob in self.knobs:
            size *= len(knob.domain)
        return size

    def default_config(self, shape: Shape, arch: str) -> Config:
        return self.complete({}, shape, arch)

    def parse_settings(self, settings: list[str] | tuple[str, ...], shape: Shape, arch: str) -> Config:
        """`knob=value` strings -> a full valid config: unset knobs take the first valid completion."""
        check_arch(arch)
        fixed: Config = {}
        for item in settings:
            if "=" not in item:
                raise ConfigError(f"--set expects knob=value, got {item!r}")
            key, text = (s.strip() for s in item.split("=", 1))
            fixed[key] = self.knob(key).parse(text)
        return self.complete(fixed, shape, arch)

    def with_defaults(self, config: Config) -> Config:
        """Every knob, in order: the given values, the rest at their first value (the default). Records written before
        a knob existed were measured with its default, so this is also how they are read."""
        return {k.name: config.get(k.name, k.domain[0]) for k in self.knobs}

    def complete(self, fixed: Config, shape: Shape, arch: str) -> Config:
        for key, value in fixed.items():
            if value not in self.knob(key).domain:
                allowed = ", ".join(map(str, self.knob(key).domain))
                raise ConfigError(f"knob {key}: {value!r} is not allowed; allowed: {allowed}")
        if len(fixed) == len(self.knobs):
            problems = self.violations(fixed, shape, arch)
            if problems:
                raise ConfigError(f"{config_label(self.name, fixed)} is not valid: {'; '.join(problems)}")
            return {k.name: fixed[k.name] for k in self.knobs}
        # The rest at their first values is the first completion in the space's order: take it when it is valid.
        trial = self.with_defaults(fixed)
        if not self.violations(trial, shape, arch):
            return trial
        for config in self.configs(shape, arch):
            if all(config[k] == v for k, v in fixed.items()):
                return config
        # Say which constraint the fixed knobs break, with the rest at their first values.
        problems = self.violations(trial, shape, arch) or ["no completion satisfies the constraints"]
        fixed_text = ", ".join(f"{k}={v}" for k, v in fixed.items()) or f"{self.name} (all defaults)"
        raise ConfigError(f"{fixed_text} is not valid: {'; '.join(problems)}")

    def nearest_valid(
        self, config: Config, shape: Shape, arch: str, keep: tuple[str, ...] = (), max_changes: int = 2
    ) -> Config | None:
        """`config` itself when valid, else the valid config with the fewest other knobs changed (at most
        `max_changes`, none of `keep`; the first in knob and domain order); None when none is that close."""
        others = [k for k in self.knobs if k.name not in keep]
        for count in range(max_changes + 1):
            for picked in itertools.combinations(others, count):
                alternatives = [[v for v in k.domain if v != config[k.name]] for k in picked]
                for values in itertools.product(*alternatives):
                    candidate = {**config, **{k.name: v for k, v in zip(picked, values, strict=True)}}
                    if not self.violations(candidate, shape, arch):
                        return candidate
        return None

    def check_valid(self, config: Config, shape: Shape, arch: str) -> None:
        problems = self.violations(config, shape, arch)
        if problems:
            raise ConfigError(f"{config_label(self.name, config)} is not valid: {'; '.join(problems)}")


class CudaFamily(Family):
    """A family whose variants are one Jinja CUDA template rendered per config and compiled NVRTC → ptxas.

    Besides Family's members it gives:
      template        the template's file name: found beside the module that defines the family (or in
                      `template_dir`), else among the built-in templates; an absolute path works too
      template_dir    optional folder to look in first
      kernel_name     the `extern "C" __global__` function the template defines
      param_names     its pointer parameters in order: input names, and the output under any other name
      template_vars(config, shape)   everything the template needs
      scalar_args(shape)             the non-pointer arguments after the buffers, as numpy scalars
    """

    template: str
    template_dir: str | None = None
    kernel_name: str
    param_names: tuple[str, ...]

    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "dims", "knobs", "template", "kernel_name", "param_names")

    @abstractmethod
    def template_vars(self, config: Config, shape: Shape) -> dict:
        """Everything the template needs; the template must not compute what the constraints rely on."""

    @abstractmethod
    def scalar_args(self, shape: Shape) -> tuple:
        """Non-pointer kernel arguments after the buffers, as (numpy scalar, ...)."""

    def template_path(self) -> Path:
        given = Path(self.template)
        if given.is_absolute():
            return given
        folders = [Path(self.template_dir)] if self.template_dir else []
        folders += [Path(inspect.getfile(type(self))).resolve().parent, builtin_template_dir()]
        for folder in folders:
            if (folder / given).is_file():
                return folder / given
        where = ", ".join(str(f) for f in folders)
        raise InputError(f"{self.name}: template {self.template!r} not found (looked in {where})")

    def render(self, config: Config, shape: Shape) -> str:
        path = self.template_path()
        try:
            return _environment(str(path.parent)).get_template(path.name).render(**self.template_vars(config, shape))
        except jinja2.TemplateSyntaxError as exc:
            raise InputError(f"template syntax error: {exc.message}", file=str(path), line=exc.lineno) from None
        except jinja2.TemplateError as exc:
            raise InputError(
                f"rendering {config_label(self.name, config)} failed: {exc}", file=str(path), line=_template_line(exc)
            ) from None

    def build(self, config: Config, shape: Shape, arch: str) -> Variant:
        self.check_valid(config, shape, arch)
        source = self.render(config, shape)
        launch = self.launch(config, shape, arch)
        label = config_label(self.name, config)
        art = build_from_cu(source, arch, label)
        art = dataclasses.replace(art, dynamic_shared=launch.dynamic_shared)
        return Variant(
            self.name, dict(config), dict(shape), arch, source, self.kernel_name, self.param_names, launch, art
        )


def _template_line(exc: BaseException) -> int | None:
    """The template line an error was raised at: Jinja rewrites its tracebacks so the template's frames carry it."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(".j2") or "template" in tb.tb_frame.f_code.co_name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
