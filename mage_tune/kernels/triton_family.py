"""Families whose variants are configs of a user's `@triton.jit` kernel.

A config sets the kernel's constexpr arguments and Triton's launch options (`num_warps`, `num_stages`, and `num_ctas`
/ `maxnreg` where this Triton has them). Each config is compiled offline as the JIT launches it for the shape
(16-byte aligned pointers, integers divisible by 16 or equal to 1 specialized), so the census (registers, spills,
shared memory, occupancy) prunes impossible or spilling configs before any GPU time; on the GPU the variant is
launched through the kernel's own JIT, in the same harness as every other variant (correct first, CUDA-graph
timing, baselines in the same worker), so a crash or a hang is a failed trial. A kernel decorated with
`@triton.autotune` brings its configs: where a family declares no knobs, each key of those configs is a knob and
a config outside the list is invalid.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import operator
import textwrap
from typing import ClassVar

import numpy as np

from mage_tune.arch import Arch
from mage_tune.errors import InputError
from mage_tune.kernels.base import OUT, Config, Family, Knob, Launch, Shape, Variant, config_label
from mage_tune.triton_ref import compile_jit

# triton loads on first use (a kernel's own module has imported it by then): mage_tune.families imports this module
# for every family file, CUDA ones too.

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
DEFAULT_NUM_WARPS = 4
_TYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


class TritonFamily(Family):
    """A family over a `@triton.jit` (or `@triton.autotune`d) kernel. Besides Family's members it gives:

      kernel          the kernel object (`@triton.jit` function, or the Autotuner `@triton.autotune` made)
      output          the pointer argument the output is written through (a family that declares `outputs`:
                      pointer arguments named like an output get that output's buffer)
      scalars(shape)  the kernel's other non-constexpr arguments by name (ints, floats)
      grid(config, shape)           the launch grid, 1 to 3 integers
      constexprs(config, shape)     the constexpr arguments' values (default: the config's keys that are
                                    constexpr arguments of the kernel)
    Pointer arguments named like an input of make_inputs get that input; their types follow device_dtype.
    `knobs` may be left out when the kernel is autotuned: its configs then make the space.
    """

    kernel: object
    output: str

    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "dims", "kernel", "output")
    source_suffix: ClassVar[str] = ".py"  # the kernel's Python source

    # --- what a Triton family gives ---------------------------------------------------------------------------
    def scalars(self, shape: Shape) -> dict[str, int | float]:
        return {}

    def grid(self, config: Config, shape: Shape) -> tuple[int, ...]:
        raise NotImplementedError(f"{type(self).__name__} must define grid(config, shape)")

    def constexprs(self, config: Config, shape: Shape) -> dict:
        names = set(self.constexpr_names())
        return {k: v for k, v in config.items() if k in names}

    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        listed = self.autotune_configs()
        if listed and not getattr(type(self), "knobs", None) and _key(config) not in {_key(c) for c in listed}:
            return ["not one of the kernel's @triton.autotune configs"]
        return []

    def constraint_text(self) -> list[str]:
        if self.autotune_configs() and not getattr(type(self), "knobs", None):
            return [f"one of the {len(self.autotune_configs())} configs of the kernel's @triton.autotune"]
        return []

    # --- the kernel -------------------------------------------------------------------------------------------
    @property
    def jit_function(self):
        from triton.runtime.jit import JITFunction

        fn = self.kernel
        while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):  # Autotuner, Heuristics wrap a JITFunction
            fn = fn.fn
        if not isinstance(fn, JITFunction):
            raise InputError(f"{self.name}: kernel is not a @triton.jit function ({type(self.kernel).__name__})")
        return fn

    def source_file(self) -> str:
        return inspect.getsourcefile(self.jit_function.fn) or self.origin

    def constexpr_names(self) -> list[str]:
        fn = self.jit_function
        return [p.name for p in fn.params if getattr(p, "is_constexpr", False)]

    def equivalents(self, config: Config, shape: Shape, arch: Arch) -> list[Config]:
        """The configs that build the same kernel as `config`, itself first: what a search need not try once it has
        tried one. num_stages only sets how Triton pipelines loops, so where the kernel at this config's constexprs
        has no loop (no `for` or `while` in its source, or in a @triton.jit function it names, outside the branches
        its constexprs rule out) every value of the num_stages knob builds one kernel."""
        knob = next((k for k in self.knobs if k.name == "num_stages"), None)
        if knob is None or "num_stages" not in config:
            return [config]
        try:
            consts = self.constexprs(config, shape)
            looped = may_loop(self.jit_function, consts)
        except Exception:  # a config the family cannot make constexprs of (invalid): only itself
            return [config]
        if looped:
            return [config]
        return [config, *({**config, "num_stages": v} for v in knob.domain if v != config["num_stages"])]

    def autotune_configs(self) -> list[Config]:
        """The kernel's @triton.autotune configs as flat dicts (constexprs and launch options)."""
        configs = getattr(self.kernel, "configs", None)
        if not configs:
            return []
        out = []
        for c in configs:
            flat = dict(c.kwargs)
            for option in LAUNCH_OPTIONS:
                value = getattr(c, option, None)
                if value is not None:
                    flat[option] = value
            out.append(flat)
        return out

    def __getattr__(self, name: str):
        # An autotuned kernel's family need not declare knobs: derive them from the configs, in order.
        if name == "knobs":
            listed = self.autotune_configs()
            if not listed:
                raise AttributeError("knobs")
            keys = list(dict.fromkeys(k for c in listed for k in c))
            return tuple(
                Knob(k, tuple(dict.fromkeys(c[k] for c in listed if k in c)), "from @triton.autotune") for k in keys
            )
        raise AttributeError(name)

    def missing_members(self) -> list[str]:
        missing = super().missing_members()
        if "kernel" not in missing and not hasattr(self, "knobs"):
            missing.append("knobs (or an @triton.autotune kernel)")
        if type(self).grid is TritonFamily.grid:
            missing.append("grid")
        return missing

    # --- build ------------------------------------------------------------------------------------------------
    def signature(self, config: Config, shape: Shape) -> tuple[dict, dict, dict]:
        """(signature, constexprs, values the JIT would see) for Triton's offline compile."""
        fn = self.jit_function
        consts = self.constexprs(config, shape)
        scalars = self.scalars(shape)
        inputs = set(self.input_names(shape))
        buffers = inputs | {o.name for o in self.outputs}
        sig, values = {}, {}
        for arg in fn.arg_names:
            if arg in consts:
                sig[arg] = "constexpr"
            elif arg in buffers or arg == self.output:
                sig[arg] = "*" + _TYPES[self.device_dtype(self._buffer_key(arg))]
                values[arg] = None
            elif arg in scalars:
                value = scalars[arg]
                sig[arg] = ("i64" if abs(value) >= 2**31 else "i32") if isinstance(value, int) else "fp32"
                values[arg] = value
            else:
                raise InputError(
                    f"{self.name}: argument {arg!r} of {fn.__name__} is neither an input ({', '.join(sorted(inputs))}),"
                    f" the output ({self.output}), a scalar (scalars()) nor a constexpr of the config",
                    file=self.source_file(),
                )
        return sig, consts, values

    def _buffer_key(self, arg: str) -> str:
        """The harness's buffer a pointer argument gets: by name, the one output of a family that declares no
        `outputs` under "__out__"."""
        return OUT if arg == self.output and not self.outputs else arg

    def input_names(self, shape: Shape) -> list[str]:
        """Names make_inputs returns (from a tiny shape of the same dims, to stay cheap)."""
        tiny = {dim: 1 for dim in self.dims}
        return list(self.make_inputs(tiny, np.random.default_rng(0)))

    def options(self, config: Config) -> dict:
        return {k: config[k] for k in LAUNCH_OPTIONS if k in config}

    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch:
        grid = tuple(int(g) for g in self.grid(config, shape))
        grid3 = (*grid, 1, 1, 1)[:3]
        return Launch(grid3, 32 * int(config.get("num_warps", DEFAULT_NUM_WARPS)), 0)

    def build(self, config: Config, shape: Shape, arch: Arch, *, checked: bool = False) -> Variant:
        if checked:
            self.check_values(config)
        else:
            self.check_valid(config, shape, arch)
        sig, consts, values = self.signature(config, shape)
        options = self.options(config)
        extra = {k: v for k, v in options.items() if k in ("num_ctas", "maxnreg")}
        kernel = compile_jit(
            self.jit_function,
            sig,
            consts,
            arch,
            int(options.get("num_warps", DEFAULT_NUM_WARPS)),
            options.get("num_stages"),
            self.name,
            values,
            True,  # as the JIT launches it for this shape
            file=self.source_file(),
            extra_options=extra,
        )
        launch = self.launch(config, shape, arch)
        launch = dataclasses.replace(launch, block=kernel.block, dynamic_shared=kernel.artifact.dynamic_shared)
        label = config_label(self.name, config)
        art = dataclasses.replace(kernel.artifact, label=label)
        return Variant(
            self.name, dict(config), dict(shape), arch, self.render(config, shape), kernel.name, kernel.param_names,
            launch, art,
        )  # fmt: skip

    def render(self, config: Config, shape: Shape) -> str:
        fn = self.jit_function
        consts = self.constexprs(config, shape)
        call = ", ".join(
            [*(f"{k}={v!r}" for k, v in consts.items()), *(f"{k}={v}" for k, v in self.options(config).items())]
        )
        return f"# launched as {fn.__name__}[{tuple(self.grid(config, shape))}](..., {call})\n{fn.src}"

    # --- the GPU side -----------------------------------------------------------------------------------------
    def launcher(self, job, shape: Shape):
        """A variant launches through the kernel's own JIT, with the config's constexprs and options."""
        if job.kind != "variant":
            return None
        fn = self.jit_function
        config = dict(job.config)
        consts = self.constexprs(config, shape)
        options = self.options(config)
        scalars = self.scalars(shape)
        grid = tuple(int(g) for g in self.grid(config, shape))
        args = [(a, self._buffer_key(a)) for a in fn.arg_names if a not in consts]

        def launch(bufs):
            values = [bufs[key] if key in bufs else scalars[a] for a, key in args]
            fn[grid](*values, **consts, **options)

        return launch

    def best_files(self, configs: list[Config]) -> dict[str, str]:
        """The winners as a ready-to-paste `triton.Config` list, best first (and JSON)."""
        names = set(self.constexpr_names())
        lines = ["import triton", "", "# best first, as mage-tune ranked them", "CONFIGS = ["]
        for config in configs:
            self.check_values(config)  # a run's trials are data: only values the knobs offer are written as code
            kwargs = {k: v for k, v in config.items() if k in names}
            options = "".join(f", {k}={v!r}" for k, v in self.options(config).items())
            lines.append(f"    triton.Config({kwargs!r}{options}),")
        lines.append("]")
        return {
            "triton_configs.py": "\n".join(lines) + "\n",
            "triton_configs.json": json.dumps(configs, indent=1) + "\n",
        }


def _key(config: Config) -> tuple:
    return tuple(sorted(config.items()))


# --- whether a kernel can hold a loop for Triton to pipeline ---------------------------------------------------------

_LOOPS: dict[tuple, bool] = {}


def may_loop(fn, constexprs: dict) -> bool:
    """Whether the @triton.jit function `fn`, given these constexpr values, may hold a loop: a `for` or `while` in
    its source or in a @triton.jit function it names, outside the `if` branches the constexprs decide against (an
    `if` Triton evaluates at compile time: a test of constexprs and literals only). False only where no loop can be
    generated; anything it cannot tell counts as a loop."""
    key = (id(fn), json.dumps(constexprs, sort_keys=True, default=repr))
    if key not in _LOOPS:
        _LOOPS[key] = _source_loops(fn, constexprs, set())
    return _LOOPS[key]


def _source_loops(fn, constexprs: dict, seen: set[int]) -> bool:
    seen.add(id(fn))
    try:
        tree = ast.parse(textwrap.dedent(fn.src))
    except (AttributeError, SyntaxError, TypeError):
        return True
    names = getattr(getattr(fn, "fn", None), "__globals__", {})
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    known = {k: v for k, v in constexprs.items() if k not in assigned}  # a name the body sets is not the argument
    return any(_loops(node, known, names, seen) for node in tree.body)


def _loops(node, constexprs: dict, names: dict, seen: set[int]) -> bool:
    if isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.comprehension):
        return True
    if isinstance(node, ast.If):
        known = _decided(node.test, constexprs)
        parts = [node.test, *(node.body if known is not False else ()), *(node.orelse if known is not True else ())]
        return any(_loops(part, constexprs, names, seen) for part in parts)
    if isinstance(node, ast.Name | ast.Attribute):
        named = _named(node, names)
        jitted = named is not None and hasattr(named, "src") and hasattr(named, "arg_names")
        if jitted and id(named) not in seen and _source_loops(named, {}, seen):
            return True  # a @triton.jit function it calls (or passes): its loops count
    return any(_loops(child, constexprs, names, seen) for child in ast.iter_child_nodes(node))


def _named(node, names: dict):
    """What a name or dotted name refers to in the kernel's module (None where it cannot tell)."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _named(node.value, names)
        return getattr(owner, node.attr, None) if owner is not None else None
    return None


_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}  # fmt: skip


def _decided(test, constexprs: dict) -> bool | None:
    """The value of an `if` test made of constexprs and literals only (None: decided at run time, or unknown)."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Name):
        return bool(constexprs[test.id]) if test.id in constexprs else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _decided(test.operand, constexprs)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_decided(v, constexprs) for v in test.values]
        stop = isinstance(test.op, ast.Or)  # the value that decides: True for `or`, False for `and`
        if stop in values:
            return stop
        return None if None in values else not stop
    if isinstance(test, ast.Compare) and all(type(op) in _COMPARE for op in test.ops):
        operands = [_value(n, constexprs) for n in (test.left, *test.comparators)]
        if any(v is _UNKNOWN for v in operands):
            return None
        try:
            return all(_COMPARE[type(op)](a, b) for op, a, b in zip(test.ops, operands, operands[1:], strict=False))
        except TypeError:
            return None
    return None


_UNKNOWN = object()


def _value(node, constexprs: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in constexprs:
        return constexprs[node.id]
    return _UNKNOWN
