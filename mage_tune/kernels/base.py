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
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

import jinja2
import numpy as np

from mage_tune.arch import DEFAULT_ARCH, Arch, get_arch
from mage_tune.compile import Artifact, SourceOptions, build_from_cu
from mage_tune.errors import ConfigError, InputError
from mage_tune.ptx_parts import entry_params

Config = dict[str, int | str]
Shape = dict[str, int]

MAX_DIM = 2**31 - 1  # kernels index with 32-bit ints; a larger dimension is refused where it enters
DEFAULT_MAX_ELEMENTS = 2**31 - 1  # largest buffer, in elements, a family accepts unless it says otherwise
REDRAW_ATTEMPTS = 400  # random redraws a draw gets that no change of two knobs makes valid (Family.redrawn_valid)
REDRAW_WIDENS = 50  # redraws after which one more knob is redrawn each time


@dataclass(frozen=True)
class Knob:
    name: str
    domain: tuple
    help: str
    free: bool = False  # no constraint reads it: every value is valid wherever the others are (enumeration skips it)

    def allows(self, value) -> bool:
        """Whether `value` is one of the domain's, its type included: a record's 16.0 or true is not the knob's 16 or
        1. A value read from data reaches a kernel's source only when it is exactly one the family offers."""
        return any(type(value) is type(allowed) and value == allowed for allowed in self.domain)

    def parse(self, text: str):
        for value in self.domain:
            if str(value) == text:
                return value
        raise ConfigError(f"knob {self.name}: {text!r} is not allowed; allowed: {', '.join(map(str, self.domain))}")


def dim3(value, what: str) -> tuple[int, int, int]:
    """`value` (an int, or 1 to 3 ints) as CUDA's dim3 (x, y, z), missing dimensions 1; ConfigError otherwise."""
    items = (value,) if isinstance(value, int | np.integer) else tuple(value) if isinstance(value, tuple | list) else ()
    if not 1 <= len(items) <= 3 or not all(isinstance(v, int | np.integer) and v >= 1 for v in items):
        raise ConfigError(f"{what} {value!r}: expected 1 to 3 positive integers (x, y, z)")
    return tuple(int(v) for v in (*items, 1, 1)[:3])


def block_json(block: tuple[int, int, int]) -> int | list[int]:
    """How records and --json write a block: an int for a 1-D block (as records always did), else [x, y, z]."""
    return block[0] if block[1:] == (1, 1) else list(block)


def shape_words(shape: Mapping[str, int]) -> str:
    """A shape for a person: m=4096 n=4096 k=4096."""
    return " ".join(f"{k}={v}" for k, v in shape.items())


def block_text(block: tuple[int, int, int]) -> str:
    """A block for a person: 256, or 32×8 (×z where z > 1)."""
    dims = block if block[2] > 1 else block[:2] if block[1] > 1 else block[:1]
    return "×".join(map(str, dims))


@dataclass(frozen=True)
class Launch:
    """How a variant is launched. `grid` and `block` take an int or 1 to 3 ints and are kept as (x, y, z)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int = 0
    cluster: int = 1  # blocks per cluster the kernel declares (__cluster_dims__): fewer are resident at once

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", dim3(self.grid, "grid"))
        object.__setattr__(self, "block", dim3(self.block, "block"))

    @property
    def threads(self) -> int:
        """Threads per block: x · y · z."""
        return self.block[0] * self.block[1] * self.block[2]


METRICS = ("rel_l2", "max_rel", "ulp")
OUT = "__out__"  # the buffer name of a family's one output when it declares no `outputs`


@dataclass(frozen=True)
class Output:
    """A buffer the kernel writes, checked on its own against the family's float64 reference.

    metric     rel_l2: ||got - ref|| / ||ref|| (the default); max_rel: max |got - ref| / max(|ref|, 1e-6 · max|ref|)
               (an error in any one element counts in full); ulp: max |got - ref| in units in the last place of
               the output's device dtype at |ref|
    tolerance  the largest accepted error in that metric; None: the family's tolerance_for(shape)
    inplace    the buffer is also an input (the kernel updates it): make_inputs gives its value before the step, the
               harness restores it from a pristine copy before the check and before every timed launch, and the
               reference gives its value one step from that pristine state
    """

    name: str
    metric: str = "rel_l2"
    tolerance: float | None = None
    inplace: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"output {self.name!r}: a name is a Python identifier")
        if self.metric not in METRICS:
            raise ConfigError(f"output {self.name}: metric {self.metric!r} is not one of {', '.join(METRICS)}")
        if self.tolerance is not None and not (isinstance(self.tolerance, int | float) and self.tolerance >= 0):
            raise ConfigError(f"output {self.name}: tolerance {self.tolerance!r} must be a number >= 0")

    @property
    def label(self) -> str:
        return "out" if self.name == OUT else self.name


# The C types a scalar parameter may be declared with: (bytes, kind) as the PTX .entry's .param shows them (PTX
# keeps no signedness: an `int` is .u32 or .s32), and the numpy type its value is packed as.
SCALAR_TYPES: dict[str, tuple[int, str, str]] = {
    "bool": (1, "int", "bool"),
    "char": (1, "int", "int8"),
    "signed char": (1, "int", "int8"),
    "unsigned char": (1, "int", "uint8"),
    "int8_t": (1, "int", "int8"),
    "uint8_t": (1, "int", "uint8"),
    "short": (2, "int", "int16"),
    "unsigned short": (2, "int", "uint16"),
    "int16_t": (2, "int", "int16"),
    "uint16_t": (2, "int", "uint16"),
    "int": (4, "int", "int32"),
    "unsigned": (4, "int", "uint32"),
    "unsigned int": (4, "int", "uint32"),
    "int32_t": (4, "int", "int32"),
    "uint32_t": (4, "int", "uint32"),
    "long": (8, "int", "int64"),
    "unsigned long": (8, "int", "uint64"),
    "long long": (8, "int", "int64"),
    "unsigned long long": (8, "int", "uint64"),
    "int64_t": (8, "int", "int64"),
    "uint64_t": (8, "int", "uint64"),
    "size_t": (8, "int", "uint64"),
    "ptrdiff_t": (8, "int", "int64"),
    "float": (4, "float", "float32"),
    "double": (8, "float", "float64"),
}
_NUMPY_CTYPE = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
                "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
                "uint64": "unsigned long long", "float32": "float", "float64": "double"}  # fmt: skip


@dataclass(frozen=True)
class Scalar:
    """A non-pointer kernel parameter after the buffers, with its C type as the kernel declares it
    ("int", "float", "size_t", ... : SCALAR_TYPES). Its value is packed as that type, range-checked, and the type is
    checked against the compiled kernel's parameter list before any launch."""

    name: str
    ctype: str

    def __post_init__(self) -> None:
        ctype = " ".join(self.ctype.split()) if isinstance(self.ctype, str) else self.ctype
        if ctype not in SCALAR_TYPES:
            raise ConfigError(f"scalar {self.name}: C type {self.ctype!r} is not one of {', '.join(SCALAR_TYPES)}")
        object.__setattr__(self, "ctype", ctype)

    def pack(self, value) -> np.generic:
        """`value` as this parameter's numpy type; ConfigError naming the parameter when it does not fit."""
        _, kind, dtype = SCALAR_TYPES[self.ctype]
        if isinstance(value, np.generic):
            value = value.item()
        if kind == "int":
            if (isinstance(value, bool) and dtype != "bool") or not isinstance(value, int):
                raise ConfigError(f"scalar {self.name} ({self.ctype}): {value!r} is not an integer")
            if dtype != "bool":
                info = np.iinfo(dtype)
                if not info.min <= value <= info.max:
                    raise ConfigError(f"scalar {self.name} ({self.ctype}): {value} is outside {info.min}..{info.max}")
            return np.dtype(dtype).type(value)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"scalar {self.name} ({self.ctype}): {value!r} is not a number")
        packed = np.dtype(dtype).type(value)
        if math.isfinite(value) and not math.isfinite(float(packed)):
            raise ConfigError(f"scalar {self.name} ({self.ctype}): {value!r} overflows {self.ctype}")
        return packed

    @staticmethod
    def of_value(index: int, value) -> Scalar:
        """The declaration a numpy scalar implies (a family that declares no `scalars`): its dtype's C type."""
        name = np.asarray(value).dtype.name
        if not isinstance(value, np.generic) or name not in _NUMPY_CTYPE:
            raise ConfigError(
                f"scalar argument {index} is {value!r} ({type(value).__name__}): declare the family's `scalars` "
                "with their C types, or give numpy scalars (np.int32, np.float32, ...)"
            )
        return Scalar(f"scalar{index}", _NUMPY_CTYPE[name])


CONTEXT = "context"  # the kind of a baseline timed for context only: not held to the tolerance, never the best


@dataclass(frozen=True)
class Baseline:
    """A kernel a family's variants are timed against: `kind` is the name `--baselines` selects it by ("triton",
    "torch", "context" for one timed for context only and not held to the tolerance, or the family's own); `config`
    is what the family's `launcher` needs to launch it."""

    label: str
    kind: str
    config: dict = dataclasses.field(default_factory=dict)


def accuracy_baseline(family, shape: Shape) -> Baseline | None:
    """The baseline a family's accuracy bar names at this shape (the first of the kind `accuracy_bar` gives), None
    without a bar: what the harness checks once per session, the warm start reads from old records and the
    independent re-timer measures beside the winners."""
    kind = family.accuracy_bar(shape)
    return next((b for b in family.baseline_kernels(shape) if b.kind == kind), None) if kind else None


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
    arch: Arch
    source: str
    kernel_name: str
    param_names: tuple[str, ...]
    launch: Launch
    artifact: Artifact

    @property
    def block(self) -> tuple[int, int, int]:
        return self.launch.block

    @property
    def threads(self) -> int:
        return self.launch.threads

    @property
    def label(self) -> str:
        return config_label(self.family, self.config)


def tile_extents(config: dict, shape: dict) -> tuple[int, int]:
    """The extents a matmul's tile rows (bm) and columns (bn) run along: m and n, or with transposed=1 (tiles of
    Cᵀ) n and m."""
    return (shape["n"], shape["m"]) if config.get("transposed") else (shape["m"], shape["n"])


def _tile_grid(config: dict, shape: dict) -> tuple[int, int, int, int] | None:
    """(rows, columns, bm, bn): tile_extents and the tile's size; None where the knobs or dims do not say."""
    bm, bn = config.get("bm"), config.get("bn")
    if not (isinstance(bm, int) and isinstance(bn, int) and bm > 0 and bn > 0) or not {"m", "n"} <= set(shape):
        return None
    return (*tile_extents(config, shape), bm, bn)


def output_tiles(config: dict, shape: dict) -> int | None:
    """How many bm × bn tiles cover a matmul's output (in the tiles' orientation: see _tile_grid)."""
    grid = _tile_grid(config, shape)
    if grid is None:
        return None
    rows, cols, bm, bn = grid
    return math.ceil(rows / bm) * math.ceil(cols / bn)


def tile_area_inside(config: dict, shape: dict) -> float | None:
    """The share of a matmul's output tiles (bm × bn knobs over an m × n output) that lies inside it, the rest being
    work on zeros at a ragged shape; with transposed=1 the tiles are Cᵀ's (bm along n, bn along m). None where the
    knobs or dims do not say."""
    grid = _tile_grid(config, shape)
    if grid is None:
        return None
    rows, cols, bm, bn = grid
    return rows * cols / (math.ceil(rows / bm) * bm * math.ceil(cols / bn) * bn)


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


def value_distance(old: object, new: object) -> float:
    """How far a knob's value moves, for ranking repairs: |new - old| / max(|new|, |old|) for numbers (a bn of
    256 is nearer 192 than 64, a stage count of 4 nearer 5 than 2), 1 for any other change (a name, a flag)."""
    if old == new:
        return 0.0
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (old, new)):
        return 1.0
    return abs(new - old) / max(abs(new), abs(old))


class Family(ABC):
    """A kernel family. Subclass `CudaFamily` or `TritonFamily` (which implement `build`).

    The whole contract, every member with what it means and a worked example of each, is docs/families.md; in short:
    the problem (name, dims, make_inputs, reference, outputs, output_shape(s), bytes_moved, flops, tolerance), the
    space (knobs, violations, constraint_text, launch, as_shipped), the baselines (baselines, baseline_kernels,
    launcher, copy_of) and what the static model, `compare` and `explain` ask (mma_passes, serial_turns, walk_steps,
    walk_twin, bulk_bytes_in_flight, reference_kernels, compare_facts, best_files).
    Each method below says what it gives.
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
    outputs: tuple[Output, ...] = ()
    input_dims: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # each input's dimensions by dim name, for shape_of
    as_shipped: Mapping[str, int | str] | None = None
    # A family whose knobs, constraints and launch are another's at that family's dims (a fused variant of it): a
    # run-time choice takes that family's tuning data where this one has none (tuning/choice.py).
    tuned_as: ClassVar[str | None] = None
    origin: str = ""  # how the registry found it (a built-in name, path.py:NAME, or entry-point name); set there
    # "a": the family builds for the arch-specific target of a device's arch only (wgmma: sm_90 -> sm_90a)
    arch_features: ClassVar[str] = ""
    source_suffix: ClassVar[str] = ".cu"  # a variant's source file: what a run directory's best/ keeps it as

    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "dims", "knobs")

    # --- the space ---------------------------------------------------------------------------------------------
    @abstractmethod
    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        """Why a config cannot work for this shape and arch; empty when it can. Starts with `refusal`'s problems."""

    def refusal(self, shape: Shape, arch: Arch) -> list[str]:
        """The problems every config has at this shape and arch (an arch the family cannot build for): its space is
        empty there, which the listing and `complete` then say without checking a combination of a large space."""
        return []

    def shape_seeds(self, shape: Shape, arch: Arch) -> list[tuple[str, Config]]:
        """The author's picks for this shape beside the defaults, each (why, valid config): configs a search should
        measure early whatever the tuning data says (a tile count that fills this shape's waves, say), since a model
        trained on other shapes cannot rank what it never saw. None by default."""
        return []

    def check_refusal(self, shape: Shape, arch: Arch) -> None:
        """A ConfigError where `refusal` says this shape and arch have no valid config."""
        refused = self.refusal(shape, arch)
        if refused:
            where = ", ".join(f"{k}={v}" for k, v in shape.items())
            raise ConfigError(f"{self.name} at {where} on {arch.name}: {'; '.join(refused)}")

    @abstractmethod
    def constraint_text(self) -> list[str]:
        """The constraints, as sentences for `mage-tune space`."""

    @abstractmethod
    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch: ...

    @abstractmethod
    def build(self, config: Config, shape: Shape, arch: Arch, *, checked: bool = False) -> Variant:
        """The config built; ConfigError where it breaks a constraint, unless `checked` (the caller has just
        checked it, as a search does once per trial)."""

    @abstractmethod
    def render(self, config: Config, shape: Shape) -> str:
        """The source a config builds from, as text for a person (`mage-tune render`)."""

    # --- correctness and cost ---------------------------------------------------------------------------------
    @abstractmethod
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray | dict[str, np.ndarray]:
        """The output in float64 (several outputs: a dict by name)."""

    def output_shape(self, shape: Shape) -> tuple[int, ...]:
        """Shape of the one output; a family with several outputs gives output_shapes instead."""
        raise ConfigError(f"{self.name} gives neither output_shape(shape) nor output_shapes(shape)")

    def output_shapes(self, shape: Shape) -> dict[str, tuple[int, ...]]:
        """Shape of each output the harness allocates (in-place outputs are inputs: make_inputs gives them)."""
        written = [o for o in self.output_list() if not o.inplace]
        if len(written) > 1:
            raise ConfigError(f"{self.name} declares {len(written)} outputs: give output_shapes(shape)")
        return {o.name: tuple(self.output_shape(shape)) for o in written}

    def output_list(self) -> tuple[Output, ...]:
        """The declared outputs, or the one output "__out__" of a family that declares none."""
        return tuple(self.outputs) or (Output(OUT),)

    def inplace_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.output_list() if o.inplace)

    def references(self, inputs: dict[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        """reference() as a dict by output name, checked to give every declared output and nothing else."""
        got = self.reference(inputs, shape)
        names = [o.name for o in self.output_list()]
        if not isinstance(got, Mapping):
            if len(names) != 1:
                raise ConfigError(f"{self.name}.reference must return a dict with the outputs {', '.join(names)}")
            return {names[0]: np.asarray(got, dtype=np.float64)}
        if sorted(got) != sorted(names):
            raise ConfigError(
                f"{self.name}.reference returned {', '.join(sorted(got)) or 'nothing'}; "
                f"the family's outputs are {', '.join(names)}"
            )
        return {name: np.asarray(got[name], dtype=np.float64) for name in names}

    def tolerance_of(self, output: Output, shape: Shape) -> float:
        return self.tolerance_for(shape) if output.tolerance is None else float(output.tolerance)

    def shipped_config(self, shape: Shape, arch: Arch) -> Config | None:
        """The `as_shipped` config, completed with defaults and checked at this shape (ConfigError when it is not
        valid here); None when the family names none."""
        if self.as_shipped is None:
            return None
        config = self.with_defaults(dict(self.as_shipped))
        unknown = sorted(set(self.as_shipped) - {k.name for k in self.knobs})
        if unknown:
            raise ConfigError(f"{self.name}.as_shipped names unknown knobs: {', '.join(unknown)}")
        self.check_valid(config, shape, arch)
        return config

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

    def bulk_bytes_in_flight(self, config: Config) -> int:
        """Bytes one block's bulk tensor (TMA) copies can hold in flight at most: its ring of shared-memory stages,
        every stage filling. The census cannot count them (a copy's size is its tensor map's box, set on the host),
        so the family says; 0: no bulk tensor copies."""
        return 0

    def walk_twin(self, config: Config) -> Config | None:
        """For a config whose blocks walk their work (walk_steps > 0): the config that does the same work a piece per
        block, so that its census counts every load a piece runs; a loop's loads are counted once, so the static
        model charges a walking kernel at least its twin's time. None: no twin."""
        return None

    def accuracy_bar(self, shape: Shape) -> str | None:
        """A baseline kind whose error on the same inputs no variant may exceed at this shape, besides the
        tolerance (the FP32-accurate matmuls: cuBLAS FP32's, where all dims reach 2048); None: the tolerance alone."""
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

    def reference_kernels(self, shape: Shape, arch: Arch, specialize: bool = True, **options) -> list:
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

    def target_arch(self, device_arch: Arch) -> Arch:
        """What this family builds for on a device of `device_arch` (where the arch is "auto"): the device's arch,
        or with `arch_features` its suffixed target where mage-tune knows one (sm_90 -> sm_90a)."""
        if not self.arch_features or device_arch.suffix:
            return device_arch
        try:
            return get_arch(device_arch.base + self.arch_features)
        except InputError:
            return device_arch

    def default_target(self) -> Arch:
        """What this family builds for where neither a GPU nor the caller names an arch: its target on the default
        arch (sm_90; an sm_90a-only family, matmul-bf16, means sm_90a), as a search on such a GPU builds it."""
        return self.target_arch(get_arch(DEFAULT_ARCH))

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
                raise ConfigError(
                    f"{self.name} needs --{dim} (or --shape {dim}=..., or {dim!r} in the shape from Python)"
                )
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ConfigError(f"dimension {dim} of {self.name} must be a whole number, got {value!r}")
            if not 1 <= value <= MAX_DIM:
                raise ConfigError(f"dimension {dim} must be between 1 and {MAX_DIM}, got {value}")
            shape[dim] = int(value)
        self.check_shape(shape)
        return shape

    def shape_of(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        """The shape a launch on inputs of these dimensions (by input name) is for: what lets a tuned kernel run on
        tensors without being told its shape (`mage_tune.load(family)(x, ...)`). By default read through
        `input_dims` (each input's dimensions by the family's dim names); InputError where the inputs disagree."""
        if not self.input_dims:
            raise InputError(
                f"{self.name} does not say how its shape follows from its inputs (input_dims or shape_of): "
                "pass shape={...}"
            )
        shape: dict[str, int] = {}
        for name, names in self.input_dims.items():
            if name not in inputs:
                raise InputError(f"{self.name} takes an input {name!r}; given {', '.join(inputs) or 'none'}")
            got = tuple(inputs[name])
            if len(got) != len(names):
                raise InputError(
                    f"{self.name}: input {name} has {len(got)} dimensions {got}; it takes {len(names)} "
                    f"({' × '.join(names)})"
                )
            for dim, size in zip(names, got, strict=True):
                if shape.setdefault(dim, int(size)) != size:
                    raise InputError(
                        f"{self.name}: input {name} has {dim} = {size} where an earlier input has {shape[dim]}"
                    )
        missing = [d for d in self.dims if d not in shape and d not in self.default_dims]
        if missing:
            raise InputError(f"{self.name}: no input gives the dimension {', '.join(missing)}: pass shape={{...}}")
        return self.shape_from({d: shape.get(d) for d in self.dims})

    def check_shape(self, shape: Shape) -> None:
        """Refuse a shape whose buffers exceed max_elements (32-bit indexing, memory) before anything is built."""
        for name, dims in self.output_shapes(shape).items():
            size = int(np.prod(dims, dtype=object))
            if size > self.max_elements:
                what = "the output" if name == OUT else f"output {name}"
                raise ConfigError(
                    f"{self.name} {shape_words(shape)}: {what} would hold {size} elements, over this family's limit of "
                    f"{self.max_elements}"
                )

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise ConfigError(f"unknown knob {name!r} for {self.name}; knobs: {', '.join(k.name for k in self.knobs)}")

    def defaults(self) -> Config:
        return {k.name: k.domain[0] for k in self.knobs}

    def configs(self, shape: Shape, arch: Arch) -> Iterator[Config]:
        """Every valid config, in a fixed order. Constraints are checked once per combination of the constrained knobs;
        free knobs (which no constraint reads) then take each of their values."""
        free = [k for k in self.knobs if k.free]
        for values in self.bound_combinations(shape, arch):
            for rest in itertools.product(*(k.domain for k in free)):
                yield self.join_combination(values, rest)

    def bound_combinations(self, shape: Shape, arch: Arch) -> Iterator[tuple]:
        """The valid value tuples of the constrained knobs (in knob order), each valid with any values of the free
        ones: the space is these times the free knobs' product, which a sampler can index without listing it."""
        if self.refusal(shape, arch):
            return
        bound = [k for k in self.knobs if not k.free]
        firsts = {k.name: k.domain[0] for k in self.knobs if k.free}
        for values in itertools.product(*(k.domain for k in bound)):
            if not self.violations({**dict(zip((k.name for k in bound), values, strict=True)), **firsts}, shape, arch):
                yield values

    def count_configs(self, shape: Shape, arch: Arch) -> int:
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

    def default_config(self, shape: Shape, arch: Arch) -> Config:
        return self.complete({}, shape, arch)

    def parse_settings(self, settings: list[str] | tuple[str, ...], shape: Shape, arch: Arch) -> Config:
        """`knob=value` strings -> a full valid config: unset knobs take the first valid completion."""
        fixed: Config = {}
        for item in settings:
            if "=" not in item:
                raise ConfigError(f"--set expects knob=value, got {item!r}")
            key, text = (s.strip() for s in item.split("=", 1))
            value = self.knob(key).parse(text)
            if key in fixed and fixed[key] != value:
                raise ConfigError(f"--set {key} is given twice ({fixed[key]} and {value})")
            fixed[key] = value
        return self.complete(fixed, shape, arch)

    def with_defaults(self, config: Config) -> Config:
        """Every knob, in order: the given values, the rest at their first value (the default). Records written before
        a knob existed were measured with its default, so this is also how they are read."""
        return {k.name: config.get(k.name, k.domain[0]) for k in self.knobs}

    def value_problems(self, config: Config) -> list[str]:
        """The keys of `config` that are no knob of the family and the values their knob does not offer (`allows`);
        empty when there are none. Every config is checked so before it is built: a recorded one is data, and its
        values are written into the kernel's source."""
        knobs = {k.name: k for k in self.knobs}
        problems = []
        for key, value in config.items():
            knob = knobs.get(key)
            if knob is None:
                problems.append(f"unknown knob {key!r} for {self.name}; knobs: {', '.join(knobs)}")
            elif not knob.allows(value):
                allowed = ", ".join(map(str, knob.domain))
                problems.append(f"knob {key}: {value!r} is not allowed; allowed: {allowed}")
        return problems

    def complete(self, fixed: Config, shape: Shape, arch: Arch) -> Config:
        problems = self.value_problems(fixed)
        if problems:
            raise ConfigError("; ".join(problems))
        if len(fixed) == len(self.knobs):
            problems = self.violations(fixed, shape, arch)
            if problems:
                raise ConfigError(f"{config_label(self.name, fixed)} is not valid: {'; '.join(problems)}")
            return {k.name: fixed[k.name] for k in self.knobs}
        self.check_refusal(shape, arch)
        # The rest at their first values is the first completion in the space's order: take it when it is valid.
        trial = self.with_defaults(fixed)
        if not self.violations(trial, shape, arch):
            return trial
        # Else the first valid config in the space's order (configs()) that keeps the fixed values: the constrained
        # knobs' combinations in the same order with the fixed ones pinned, so only those are checked; the free knobs
        # (no constraint reads them) keep their fixed or first values.
        bound = [k for k in self.knobs if not k.free]
        free = {k.name: fixed.get(k.name, k.domain[0]) for k in self.knobs if k.free}
        for values in itertools.product(*(((fixed[k.name],) if k.name in fixed else k.domain) for k in bound)):
            candidate = {**dict(zip((k.name for k in bound), values, strict=True)), **free}
            if not self.violations(candidate, shape, arch):
                return {k.name: candidate[k.name] for k in self.knobs}
        # Say which constraint the fixed knobs break, with the rest at their first values.
        problems = self.violations(trial, shape, arch) or ["no completion satisfies the constraints"]
        fixed_text = ", ".join(f"{k}={v}" for k, v in fixed.items()) or f"{self.name} (all defaults)"
        raise ConfigError(f"{fixed_text} is not valid: {'; '.join(problems)}")

    def nearest_valid(
        self,
        config: Config,
        shape: Shape,
        arch: Arch,
        keep: tuple[str, ...] = (),
        max_changes: int = 2,
        min_changes: int = 0,
    ) -> Config | None:
        """`config` itself when valid, else the valid config with the fewest other knobs changed (at most
        `max_changes`, none of `keep`), of those the one whose new values lie nearest the old (`value_distance`
        summed; ties in knob and domain order); None when none is that close. `min_changes=1`: the caller has found
        `config` invalid already, so it is not checked again."""
        others = [k for k in self.knobs if k.name not in keep]
        for count in range(min_changes, max_changes + 1):
            candidates = []
            for picked in itertools.combinations(others, count):
                alternatives = [[v for v in k.domain if v != config[k.name]] for k in picked]
                for values in itertools.product(*alternatives):
                    changes = {k.name: v for k, v in zip(picked, values, strict=True)}
                    candidates.append((sum(value_distance(config[n], v) for n, v in changes.items()), changes))
            # sorted is stable: equal distances keep knob and domain order; checked nearest first, so the first
            # valid one is the answer and the constraints of the farther ones are never evaluated
            for _, changes in sorted(candidates, key=lambda pair: pair[0]):
                candidate = {**config, **changes}
                if not self.violations(candidate, shape, arch):
                    return candidate
        return None

    def redrawn_valid(
        self, config: Config, shape: Shape, arch: Arch, rng: random.Random, attempts: int = REDRAW_ATTEMPTS
    ) -> Config | None:
        """A valid config that keeps most of `config`'s values, for a draw that no change of two knobs repairs: three
        knobs (then more, every REDRAW_WIDENS attempts) redrawn at random from their domains until the constraints
        hold; None after `attempts` draws. About one in five of matmul's configs is valid, so a few draws do."""
        knobs = list(self.knobs)
        for attempt in range(attempts):
            picked = rng.sample(knobs, min(len(knobs), 3 + attempt // REDRAW_WIDENS))
            candidate = {**config, **{k.name: rng.choice(k.domain) for k in picked}}
            if not self.violations(candidate, shape, arch):
                return candidate
        return None

    def config_problems(self, config: Config) -> list[str]:
        """`value_problems`, and the knobs `config` sets no value for: empty for a config a build takes."""
        missing = [k.name for k in self.knobs if k.name not in config]
        return self.value_problems(config) + ([f"no value for {', '.join(missing)}"] if missing else [])

    def check_values(self, config: Config) -> None:
        """A ConfigError unless `config` sets every knob, each to a value its knob offers: what a build checks even
        of a config whose constraints were just checked (its values are written into the kernel's source)."""
        problems = self.config_problems(config)
        if problems:
            raise ConfigError(f"{config_label(self.name, config)} is not valid: {'; '.join(problems)}")

    def check_valid(self, config: Config, shape: Shape, arch: Arch) -> None:
        self.check_values(config)
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
      param_names     its pointer parameters in order: input and output names (a family without `outputs`: the
                      one output under any name that is not an input)
      scalar_params   Scalar(name, ctype) for each non-pointer parameter after the pointers, as the kernel declares
                      it ("int", "float", "size_t", ...); () : scalar_args gives numpy scalars whose dtypes say it
      compile_options compiler options every variant is built with, from an allowed set (compile.ALLOWED_OPTIONS:
                      "--use_fast_math", "-ftz=true", "-maxrregcount=N", ...)
      include_dirs    folders searched for the template's #include files (relative ones: to the family's file)
      defines         macros, NAME or NAME=VALUE
      template_vars(config, shape)   everything the template needs
      scalar_args(shape)             the values of the non-pointer arguments, in order (or a dict by name)
      source_options(config, shape)  how one config is compiled: the family's options, include folders and
                                     defines and the command line's (-I, -D); override it to let a knob choose
                                     (a `fast_math` knob adds "--use_fast_math")

    The compiled kernel's parameter list (its PTX .entry) is checked against param_names and the scalars' C types
    before anything is launched.
    """

    template: str
    template_dir: str | None = None
    kernel_name: str
    param_names: tuple[str, ...]
    scalar_params: tuple[Scalar, ...] = ()
    compile_options: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    extra_source_options: SourceOptions | None = None  # the command line's -I and -D (with_source_options)

    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "dims", "knobs", "template", "kernel_name", "param_names")

    @abstractmethod
    def template_vars(self, config: Config, shape: Shape) -> dict:
        """Everything the template needs; the template must not compute what the constraints rely on."""

    @abstractmethod
    def scalar_args(self, shape: Shape) -> tuple | Mapping:
        """Non-pointer kernel arguments after the buffers, in order (or by name with scalar_params)."""

    def scalar_declarations(self, shape: Shape) -> tuple[Scalar, ...]:
        """scalar_params, or what the numpy scalars scalar_args gives imply."""
        if self.scalar_params:
            return tuple(self.scalar_params)
        values = self.scalar_args(shape)
        if isinstance(values, Mapping):
            raise ConfigError(f"{self.name}: scalar_args gives a dict; declare scalar_params (name and C type)")
        return tuple(Scalar.of_value(i, v) for i, v in enumerate(values))

    def packed_scalars(self, shape: Shape) -> tuple[np.generic, ...]:
        """scalar_args packed as their declared C types, in the kernel's order; ConfigError naming a parameter whose
        value is missing, extra or does not fit."""
        values = self.scalar_args(shape)
        declared = self.scalar_declarations(shape)
        if isinstance(values, Mapping):
            names = [d.name for d in declared]
            missing, extra = [n for n in names if n not in values], sorted(set(values) - set(names))
            if missing or extra:
                raise ConfigError(
                    f"{self.name}: scalar_args "
                    + "; ".join(
                        ([f"lacks {', '.join(missing)}"] if missing else [])
                        + ([f"gives unknown {', '.join(extra)}"] if extra else [])
                    )
                )
            values = tuple(values[n] for n in names)
        values = tuple(values)
        if len(values) != len(declared):
            raise ConfigError(
                f"{self.name}: scalar_args gives {len(values)} values for {len(declared)} scalar parameters "
                f"({', '.join(d.name for d in declared) or 'none'})"
            )
        return tuple(d.pack(v) for d, v in zip(declared, values, strict=True))

    def check_parameters(self, ptx: str, shape: Shape) -> None:
        """The compiled kernel takes exactly param_names' pointers then the declared scalars, each of its C type's
        size and kind (PTX keeps no signedness); ConfigError naming the first parameter that differs."""
        params = entry_params(ptx, self.kernel_name)
        if params is None:
            raise ConfigError(f"{self.name}: the compiled module has no kernel {self.kernel_name!r} (kernel_name)")
        expected = [(name, "pointer", 8, "int") for name in self.param_names]
        expected += [(d.name, d.ctype, *SCALAR_TYPES[d.ctype][:2]) for d in self.scalar_declarations(shape)]
        if len(params) != len(expected):
            raise ConfigError(
                f"{self.name}: kernel {self.kernel_name} takes {len(params)} parameters; the family passes "
                f"{len(expected)} ({len(self.param_names)} pointers: {', '.join(self.param_names)}; scalars: "
                f"{', '.join(f'{n} ({t})' for n, t, *_ in expected[len(self.param_names) :]) or 'none'})"
            )
        for index, ((name, ctype, size, kind), (_, got_kind, got_size)) in enumerate(
            zip(expected, params, strict=True)
        ):
            if (got_kind, got_size) != (kind, size):
                what = "a pointer" if ctype == "pointer" else f"{ctype}"
                got = "a struct" if got_kind == "bytes" else f"a {got_size * 8}-bit {got_kind}"
                raise ConfigError(
                    f"{self.name}: parameter {index} of {self.kernel_name} ({name}) is passed as {what} "
                    f"({size * 8}-bit {kind}) but the kernel declares {got}"
                )

    def with_source_options(self, extra: SourceOptions | None) -> CudaFamily:
        """This family building with the command line's -I and -D as well (a copy; this one is unchanged)."""
        if extra is None:
            return self
        # not copy.copy: a found family reduces to its origin (registry.py), which gives back the one cached instance
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied.extra_source_options = extra
        return copied

    def source_options(self, config: Config, shape: Shape) -> SourceOptions:
        """How `config` is compiled: the family's include folders (relative to its file), defines and options, then
        the command line's."""
        here = Path(inspect.getfile(type(self))).resolve().parent
        extra = self.extra_source_options or SourceOptions()
        return SourceOptions(
            includes=(*(str(here / d) for d in self.include_dirs), *extra.includes),
            defines=(*self.defines, *extra.defines),
            options=(*self.compile_options, *extra.options),
            std=extra.std,
            compiler="nvrtc" if extra.compiler == "auto" else extra.compiler,
        )

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

    def build(self, config: Config, shape: Shape, arch: Arch, *, checked: bool = False) -> Variant:
        arch = get_arch(arch)  # a caller's arch name ("sm_90a") is taken too: records and choices keep names
        if checked:
            self.check_values(config)
        else:
            self.check_valid(config, shape, arch)
        source = self.render(config, shape)
        launch = self.launch(config, shape, arch)
        label = config_label(self.name, config)
        # always through SourceOptions: the CUDA headers (<cooperative_groups.h>, <cuda_bf16.h>) are then found
        art = build_from_cu(source, arch, label, source_options=self.source_options(config, shape))
        self.check_parameters(art.ptx or "", shape)
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
