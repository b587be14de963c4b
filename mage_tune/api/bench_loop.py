"""`mage_tune.bench(family, shape, ...)`: check and time variants on the GPU with the baselines in the same run, what
`mage-tune bench` runs and prints.

    >>> result = mage_tune.bench("layernorm", {"m": 4096, "d": 768}, settings={"vec": [4, 8]})
    >>> result.best_config, result.best_us, result.baselines     # {knob: value}, µs, {label: µs}
    >>> print(result.table())                                    # what the command prints
    >>> result.to_json()                                         # the run record, what `bench --json` prints
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tabulate import tabulate

from mage_tune.api.common import (
    Echo,
    FamilyArg,
    OptionConflict,
    family_and_shape,
    plain,
    progress_bar,
    quiet,
    setting_items,
    strings,
)
from mage_tune.arch import Arch, get_arch
from mage_tune.census import census_variant
from mage_tune.census.features import features_json
from mage_tune.errors import InputError
from mage_tune.kernels import select
from mage_tune.kernels.base import Family, Shape, Variant, block_json
from mage_tune.kernels.recorded import family_record
from mage_tune.measure import bench as run_bench
from mage_tune.measure import device, shipped
from mage_tune.measure.baselines import is_context
from mage_tune.measure.records import BenchRun, Result
from mage_tune.measure.summary import check_text, rows
from mage_tune.outputs import refuse_existing_out
from mage_tune.problem import Problem
from mage_tune.search.record import write_atomic

REGIMES = {"cold": ("cold",), "hot": ("hot",), "both": ("cold", "hot")}


@dataclass(frozen=True)
class KernelResult:
    """One kernel of a bench: a variant, or a baseline (Triton, torch, a copy, the family's config as shipped)."""

    label: str
    kind: str  # variant, shipped, triton, torch, copy, context
    session: int  # the worker session that measured it: compare times within one session
    ok: bool  # passed its check against the float64 reference (a context-only baseline: its outputs were finite)
    error: str
    config: dict
    time_us: float | None  # the median of the first regime (cold by default); None: not timed (check_only, failed)
    times: dict[str, float]  # regime -> median µs
    census: dict  # a variant's census features (registers, occupancy, global_load_bits, …); {} for a baseline
    result: Result = field(repr=False, compare=False)  # as the worker gave it back (timings, each output's check)


@dataclass(frozen=True)
class BenchResult:
    """A bench's results: every kernel checked and timed, the fastest variant, the baselines beside it."""

    family: str
    shape: dict
    arch: str  # the arch's name, as the record keeps it
    regimes: tuple[str, ...]
    results: tuple[KernelResult, ...]  # baselines then variants, as measured
    best: KernelResult | None  # the fastest variant that passed its check (first regime)
    baselines: dict[str, float]  # label -> first regime's µs of each passing baseline (its fastest session's)
    out: Path | None  # where the record was written (out=)
    run: BenchRun = field(repr=False, compare=False)  # as the worker session gave it back
    record: dict = field(repr=False, compare=False)  # the run record (schema mage-tune.bench/1)
    notes: tuple[str, ...] = ()  # why the shipped config was left out, where it was
    context: dict[str, float] = field(default_factory=dict)  # as baselines, of the context-only ones (not baselines)

    @property
    def best_config(self) -> dict | None:
        return dict(self.best.config) if self.best else None

    @property
    def best_us(self) -> float | None:
        return self.best.time_us if self.best else None

    @property
    def failed(self) -> tuple[KernelResult, ...]:
        """The built variants (the shipped config among them) whose check failed."""
        return tuple(r for r in self.results if not r.ok and r.result.kind == "variant")

    def table(self) -> str:
        """What `mage-tune bench` prints: the GPU, each session's ceilings, a table per regime, the shipped line."""
        return format_run(self.run, self.regimes)

    def to_json(self) -> dict:
        """The run record, what `mage-tune bench --json` prints (and out= writes)."""
        return plain(self.record)


def bench(
    family: FamilyArg,
    shape: Mapping[str, int] | None = None,
    *,
    arch: str | Arch | None = None,
    settings: Mapping[str, object] | str | Sequence[str] = (),
    sources: str | Sequence[str] = (),
    configs: str | Path | Sequence[Mapping[str, object]] | None = None,
    all_configs: bool = False,
    sample: int | None = None,
    check_only: bool = False,
    regime: str = "cold",
    baselines: str | Sequence[str] | None = None,
    rounds: int = 7,
    timeout_s: float = 60.0,
    seed: int | None = None,
    out: str | Path | None = None,
    force: bool = False,
    include_dirs: str | Sequence[str] = (),
    defines: str | Sequence[str] = (),
    compiler_options: str | Sequence[str] = (),
    progress: bool = False,
    echo: Echo | None = None,
) -> BenchResult:
    """Check every variant against the float64 reference, then time it by CUDA-graph replay beside the family's
    baselines in the same worker session, as `mage-tune bench` does, with the same defaults. NoDeviceError where no
    GPU is here.

    The variants: `settings` ({"threads": 128, "vec": [4, 8]} or ["threads=128", "vec=4,8"]: a list of values
    sweeps every valid combination), `sources` (hand-written .cu files launched like the settings' config),
    `configs` (a JSON file listing configs, or a list of dicts), or `all_configs` (the whole space, `sample`
    configs of it). `arch`: None or "auto" is the GPU's. `regime`: cold, hot or both. `baselines`: None (the
    family's own), "none", or kinds ("triton,torch" or a list). `check_only`: no timing. `out`: also write the
    record there (`force` replaces one). `include_dirs`, `defines`, `compiler_options`: as -I, -D and
    --compiler-option. `progress`: a bar on stderr. `echo(line)` hears what the command says on stderr (the GPU,
    configs skipped or not compiled, the shipped config left out); nothing is printed otherwise."""
    say = echo or quiet
    if configs is not None and (settings or all_configs or sources):
        raise OptionConflict("--configs lists the configs itself: leave out --set, --all and --source")
    if regime not in REGIMES:
        raise InputError(f"regime={regime!r}: one of {', '.join(REGIMES)}")
    refuse_existing_out(out or None, force)
    device.require_gpu()
    say(f"measuring on the GPU: {device.gpu_mode()[1]}")
    fam, shape = family_and_shape(family, shape, include_dirs, defines, compiler_options)
    arch = fam.target_arch(device.arch_of_device()) if arch in (None, "auto") else get_arch(arch)  # an Arch from here
    variants = _variants(fam, shape, arch, setting_items(settings), strings(sources), configs, all_configs, sample, say)
    regimes = REGIMES[regime]
    names = _baseline_names(baselines)
    partial = Path(f"{out}.partial.jsonl") if out else None
    notes: list[str] = []

    def on_note(line: str) -> None:  # the shipped config left out: said, and kept in the record
        notes.append(line)
        say(line)

    with progress_bar(progress, len(variants) + 1, "measuring", "result") as bar:

        def on_result(result) -> None:
            bar.update(1)
            if partial:  # results so far survive a killed run
                with open(partial, "a") as f:
                    f.write(json.dumps(shipped.recorded(result).to_json()) + "\n")

        run = run_bench(
            Problem(fam, shape, arch),
            variants,
            regimes=regimes,
            baselines=names,
            rounds=rounds,
            seed=seed,
            job_timeout_s=timeout_s,
            timed=not check_only,
            on_result=on_result,
            on_plan=bar.set_total,  # baselines count too: Triton's configs, torch, the copies
            on_note=on_note,
        )
    saved = run_record(run, variants, fam, "; ".join(notes), arch)
    if out:
        write_atomic(Path(out), json.dumps(saved, indent=1))
        partial.unlink(missing_ok=True)
    return _result(run, saved, arch, regimes, Path(out) if out else None, tuple(notes))


def _result(run: BenchRun, saved: dict, arch: Arch, regimes: tuple[str, ...], out, notes) -> BenchResult:
    first = regimes[0]
    results = tuple(
        KernelResult(
            label=r.label,
            kind=shipped.kind(r),
            session=r.session,
            ok=r.ok,
            error=r.error,
            config=dict(r.config),
            time_us=r.time(first),
            times={t.regime: t.median_us for t in r.timings},
            census=features_json(saved["census"][r.label]) if r.label in saved["census"] else {},
            result=r,
        )
        for r in run.results
    )
    variants = [r for r in results if r.kind == "variant" and r.ok and r.time_us is not None]
    times: dict[str, float] = {}
    context: dict[str, float] = {}  # kept apart: a context-only baseline is never the one to beat
    for r in results:
        if r.kind != "variant" and r.ok and r.time_us is not None:
            into = context if is_context(r.result) else times
            into[r.label] = min(r.time_us, into.get(r.label, r.time_us))
    return BenchResult(
        family=run.family,
        shape=dict(run.shape),
        arch=arch.name,
        regimes=regimes,
        results=results,
        best=min(variants, key=lambda r: r.time_us, default=None),
        baselines=times,
        out=out,
        notes=notes,
        run=run,
        record=saved,
        context=context,
    )


def _baseline_names(baselines: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """--baselines: None (the family's own), "none", "triton,torch", or a list of such (the option given twice: the
    kinds of both, in order, each once)."""
    if baselines is None:
        return None
    given = [baselines] if isinstance(baselines, str) else list(baselines)
    names = [b.strip() for text in given for b in text.split(",") if b.strip()]
    if "none" in names:
        if len(names) > 1:
            raise InputError(f"--baselines: 'none' cannot go with other kinds ({', '.join(names)})")
        return ()
    return tuple(dict.fromkeys(names))


def _variants(fam, shape, arch, settings, sources, configs, all_configs, sample, say: Echo) -> list[Variant]:
    def failed(error) -> None:
        say(f"compile failed: {error}")

    if configs is not None:
        return select.build_all(fam, shape, arch, _listed(fam, shape, arch, configs), failed)
    if all_configs:
        return select.build_all(fam, shape, arch, select.whole_space(fam, shape, arch, sample), failed)
    if select.is_sweep(settings):
        chosen = select.sweep(fam, shape, arch, settings, lambda why: say(f"skipped: {why}"))
        return select.build_all(fam, shape, arch, chosen, failed)
    config = fam.parse_settings(settings, shape, arch)
    # Hand-written sources first, then the template variant itself: a broken source must not stop the next one.
    return [select.from_source(fam, shape, arch, config, path) for path in sources] + [fam.build(config, shape, arch)]


def _listed(fam: Family, shape: Shape, arch: Arch, configs) -> list:
    """The configs of a JSON file (select.listed), or of a list of dicts given from Python."""
    if isinstance(configs, str | Path):
        return select.listed(fam, shape, arch, Path(configs))
    return [fam.parse_settings(setting_items(dict(c)), shape, arch) for c in configs]


def run_record(run, variants, family, shipped_note: str = "", arch: Arch | None = None) -> dict:
    """The run record bench writes (--out) and prints (--json): schema mage-tune.bench/1. `arch`: what the variants
    were compiled for (sm_90a for the Hopper families on an sm_90 device), kept so an import files them under it."""
    censuses = {}
    for v in variants:
        c = census_variant(v)
        censuses[v.label] = c.to_json()
    regimes = sorted({t.regime for r in run.results for t in r.timings})
    return {
        "schema": "mage-tune.bench/1",
        "record_id": uuid.uuid4().hex,
        "family": run.family,
        "family_origin": run.family_origin,
        "family_digest": family_record(family)["family_digest"],
        "defaults": family.with_defaults({}),
        "source_options": _source_record(family),
        "launches": {v.label: {"grid": list(v.launch.grid), "block": block_json(v.launch.block)} for v in variants},
        "shape": run.shape,
        **({"arch": arch.name} if arch else {}),
        "bytes_moved": run.bytes_moved,
        "flops": run.flops,
        "mma_passes": int(family.mma_passes),  # tensor-core products per FLOP: what explain's pipe fraction needs
        "environment": run.environment,
        "sessions": [dataclasses.asdict(s) for s in run.sessions],
        "results": [shipped.recorded(r).to_json() for r in run.results],
        "summary": {
            regime: [
                {
                    "label": row.result.label,
                    "kind": shipped.kind(row.result),
                    "session": row.result.session,
                    "time_us": row.time_us,
                    "floor_us": row.floor_us,
                    "pct_of_floor": row.pct_of_floor,
                    "vs": shipped.vs(run, row, regime),  # "shipped": ours / yours
                    "vs_context": row.vs_context,  # ours / the context-only baseline: context, never a target
                }
                for row in rows(run, regime)
            ]
            for regime in regimes
        },
        "census": censuses,
        "as_shipped": shipped.bench_summary(run, regimes, shipped_note),
    }


def _source_record(family) -> dict | None:
    """The command line's -I, -D and compiler options the variants were built with (None: as the family declares)."""
    extra = getattr(family, "extra_source_options", None)
    return extra.to_json() if extra is not None else None


def _ratios(run, row, regime: str) -> str:
    """The time / best baseline cell: a ratio per group, then the context-only baseline's, in parentheses."""
    cells = [f"{g} {x:.2f}x" for g, x in shipped.vs(run, row, regime).items()]
    if row.vs_context is not None:
        cells.append(f"(context only {row.vs_context:.2f}x)")
    return " ".join(cells) or "-"


def format_run(run, regimes) -> str:
    """Bench's table: the GPU, each session's ceilings, then per regime every kernel's check, error, time, rate,
    share of the floor and time over the best baseline, and the shipped config's line."""
    env = run.environment
    lines = [
        f"{run.family} {run.shape} on {env.get('gpu', '?')} (driver {env.get('driver', '?')}, "
        f"torch {env.get('torch', '?')}, triton {env.get('triton', '?')})"
    ]
    for s in run.sessions:
        lines.append(
            f"session {s.index}: copy ceiling {s.copy_gbs:.0f} GB/s (best of {', '.join(s.copy_kernels)}), "
            f"FP32 {s.fp32_tflops:.1f} TFLOP/s, control {s.control_us:.1f} µs"
        )
    for regime in regimes:
        table = []
        for row in rows(run, regime):
            r = row.result
            timing = next((t for t in r.timings if t.regime == regime), None)
            table.append(
                [
                    r.label,
                    shipped.kind(r),
                    r.session,
                    check_text(r),
                    row.errors,  # each declared output's error in its metric; one output: its relative error
                    f"{timing.median_us:.2f} [{timing.min_us:.2f}-{timing.max_us:.2f}]" if timing else "-",
                    f"{r.single_launch_us:.2f}" if r.single_launch_us else "-",
                    row.rate,
                    f"{row.pct_of_floor:.0%}" if row.pct_of_floor else "-",
                    _ratios(run, row, regime),
                ]
            )
        floor = rows(run, regime)[0].floor_us if run.results else 0.0
        lines.append(f"\n{regime} regime (µs per launch from graph replay; floor {floor:.2f} µs)")
        lines.append(
            tabulate(
                table,
                headers=[
                    "kernel",
                    "kind",
                    "sess",
                    "check",
                    "error",
                    "µs median [min-max]",
                    "1 launch µs",
                    "rate",
                    "% floor",
                    "time / best baseline",
                ],
                tablefmt="simple",
                disable_numparse=True,
            )
        )
        said = shipped.summary_line(run, regime)
        if said:
            lines.append(said)
    return "\n".join(lines)
