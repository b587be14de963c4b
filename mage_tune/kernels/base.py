"""The contract every kernel family meets: a declared space of knobs, constraints that exclude what cannot work,
a Jinja template that renders any valid config to CUDA, its launch shape, a float64 reference and its baselines.

A family is a subclass of `Family` with class attributes `name`, `template`, `knobs`, `dims` and the methods
marked abstract. Everything else (parsing `--set`, enumerating the space, rendering, compiling) is shared here.
"""

from __future__ import annotations

import dataclasses
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from mage_tune.compile import Artifact, build_from_cu, check_arch
from mage_tune.errors import ConfigError

Config = dict[str, int | str]
Shape = dict[str, int]

# Largest dynamic shared memory a block may opt into, by arch (bytes).
SMEM_OPTIN = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024}


@dataclass(frozen=True)
class Knob:
    name: str
    domain: tuple
    help: str

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
class Variant:
    """One rendered and compiled config: what census, bench and search pass around."""

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


def template_dir() -> Path:
    """kernels/templates/: installed as the package mage_tune.templates (pyproject's package-dir), or, when the
    checkout is merely on PYTHONPATH, found beside the package."""
    from importlib.resources import files

    try:
        return Path(str(files("mage_tune.templates")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "kernels" / "templates"


@cache
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,  # a missing variable is an error, never an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class Family(ABC):
    name: str
    template: str
    knobs: tuple[Knob, ...]
    dims: tuple[str, ...]  # shape dimensions the family needs, e.g. ("m", "d")
    default_dims: dict[str, int]
    kernel_name: str
    param_names: tuple[str, ...]
    baselines: tuple[str, ...]
    tolerance: float = 1e-5  # largest accepted ||out - ref|| / ||ref|| against the float64 reference

    # --- the space ---------------------------------------------------------------------------------------------
    @abstractmethod
    def violations(self, config: Config, shape: Shape, arch: str) -> list[str]:
        """Why a config cannot work for this shape and arch; empty when it can."""

    @abstractmethod
    def constraint_text(self) -> list[str]:
        """The constraints, as sentences for `mage-tune space`."""

    @abstractmethod
    def launch(self, config: Config, shape: Shape) -> Launch: ...

    @abstractmethod
    def template_vars(self, config: Config, shape: Shape) -> dict:
        """Everything the template needs; the template must not compute what the constraints rely on."""

    # --- correctness and cost ---------------------------------------------------------------------------------
    @abstractmethod
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        """The output in float64."""

    @abstractmethod
    def output_shape(self, shape: Shape) -> tuple[int, ...]: ...

    @abstractmethod
    def scalar_args(self, shape: Shape) -> tuple:
        """Non-pointer kernel arguments after the buffers, as (numpy scalar, ...)."""

    @abstractmethod
    def bytes_moved(self, shape: Shape) -> int:
        """Each input read once, each output written once."""

    def flops(self, shape: Shape) -> int:
        return 0

    # --- shared machinery -------------------------------------------------------------------------------------
    def shape_from(self, **given: int | None) -> Shape:
        shape = {}
        for dim in self.dims:
            value = given.get(dim)
            if value is None:
                value = self.default_dims.get(dim)
            if value is None:
                raise ConfigError(f"{self.name} needs --{dim}")
            if value < 1:
                raise ConfigError(f"--{dim} must be at least 1, got {value}")
            shape[dim] = int(value)
        return shape

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise ConfigError(f"unknown knob {name!r} for {self.name}; knobs: {', '.join(k.name for k in self.knobs)}")

    def configs(self, shape: Shape, arch: str) -> Iterator[Config]:
        """Every valid config, in a fixed order."""
        names = [k.name for k in self.knobs]
        for values in itertools.product(*(k.domain for k in self.knobs)):
            config = dict(zip(names, values, strict=True))
            if not self.violations(config, shape, arch):
                yield config

    def space_size(self) -> int:
        size = 1
        for knob in self.knobs:
            size *= len(knob.domain)
        return size

    def default_config(self, shape: Shape, arch: str) -> Config:
        try:
            return next(iter(self.configs(shape, arch)))
        except StopIteration:
            raise ConfigError(f"{self.name}: no valid config for shape {shape} on {arch}") from None

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
        raise ConfigError(f"{', '.join(f'{k}={v}' for k, v in fixed.items())} is not valid: {'; '.join(problems)}")

    def render(self, config: Config, shape: Shape) -> str:
        return _environment().get_template(self.template).render(**self.template_vars(config, shape))

    def build(self, config: Config, shape: Shape, arch: str) -> Variant:
        problems = self.violations(config, shape, arch)
        if problems:
            raise ConfigError(f"{config_label(self.name, config)} is not valid: {'; '.join(problems)}")
        source = self.render(config, shape)
        launch = self.launch(config, shape)
        label = config_label(self.name, config)
        art = build_from_cu(source, arch, label)
        art = dataclasses.replace(art, dynamic_shared=launch.dynamic_shared)
        return Variant(
            self.name, dict(config), dict(shape), arch, source, self.kernel_name, self.param_names, launch, art
        )
