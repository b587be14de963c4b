"""`mage_tune.search(family, shape, ...)`: the whole search loop from Python, what `mage-tune search` runs and
prints.

    >>> result = mage_tune.search("layernorm", {"m": 4096, "d": 768}, trials=40)
    >>> result.best_config, result.best_us, result.baselines     # {knob: value}, µs, {label: µs}
    >>> result.trials[0].census["registers"]                     # every trial with its census features
    >>> print(result.table())                                    # what the command prints
    >>> result.to_json()                                         # what `search --json` prints
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mage_tune.api.common import Echo, FamilyArg, OptionConflict, family_and_shape, plain, progress_bar, quiet
from mage_tune.arch import Arch, get_arch
from mage_tune.errors import InputError, MageError
from mage_tune.measure import device
from mage_tune.measure.baselines import is_context
from mage_tune.search import gpus as on_gpus
from mage_tune.search import record, report
from mage_tune.search.runner import Search
from mage_tune.search.samplers import SAMPLERS
from mage_tune.search.spec import SearchSpec, spec_json
from mage_tune.search.summary import write_summary
from mage_tune.storage import storage_errors
from mage_tune.textwidth import wrap

WARM_STARTS = ("auto", "off", "other-shapes")
SCORED = ("measured", "modelled")


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a search, as the run directory's trials.jsonl keeps it."""

    number: int
    outcome: str  # measured, modelled, pruned, compile_error, failed; duplicate (recorded, never counted)
    value: float | None  # µs: the cold median measured, or the static model's estimate; None where not scored
    config: dict
    label: str
    source: str  # where the config came from: the sampler, "nearest …", "model #n", "polish …"
    census: dict  # census features: registers, occupancy, global_load_bits, loads_in_flight, barriers, …
    why: str = ""  # a pruned trial's reason, a failed or uncompiled one's error
    session: int | None = None  # the measuring session (a measured trial's)
    line: dict = field(default_factory=dict, repr=False, compare=False)  # the whole trials.jsonl line

    @classmethod
    def from_line(cls, line: dict) -> TrialRecord:
        return cls(
            number=line["number"],
            outcome=line["outcome"],
            value=line.get("value"),
            config=dict(line.get("config") or {}),
            label=str(line.get("label", "")),
            source=str(line.get("source", "")),
            census=dict(line.get("census") or {}),
            why=str(line.get("reason") or line.get("error") or ""),
            session=line.get("session"),
            line=line,
        )

    @property
    def scored(self) -> bool:
        return self.outcome in SCORED


@dataclass(frozen=True)
class SearchResult:
    """A search's end: its best trial, its baselines and every trial, read back from its run directory."""

    family: str
    shape: dict
    arch: str  # the arch's name, as the run directory keeps it
    mode: str  # "measured" (checked and timed on the GPU) or "static" (the census model's estimates)
    study: str
    run_dir: Path  # report.md, best/, trials.jsonl, …: `mage-tune report RUN_DIR` rebuilds the tables
    best: TrialRecord | None
    trials: tuple[TrialRecord, ...]  # every recorded trial, by number
    baselines: dict[str, float]  # label -> cold µs of each passing baseline (its fastest session's), as shipped too
    as_shipped: dict | None  # the family's shipped config beside the best (report.shipped); None: it names none
    outcomes: dict[str, int]  # trials by outcome
    resumed_trials: int  # trials recorded before this call (a resumed study)
    stopped: str | None  # why the search stopped before `trials` counted, where it did
    context: dict[str, float] = field(default_factory=dict)  # as baselines, of the context-only ones (not baselines)

    @property
    def best_config(self) -> dict | None:
        return dict(self.best.config) if self.best else None

    @property
    def best_us(self) -> float | None:
        return self.best.value if self.best else None

    def table(self) -> str:
        """What `mage-tune search` prints: the best configs, where trials came from, the baselines, the outcomes, the
        shipped config's line and the run directory (rebuilt from the run directory, fit to the terminal)."""
        run_dir = self.run_dir
        parts = ["\n" + report.top_table(run_dir, fit=True)] if self.best else []
        parts.append("\n" + report.source_table(run_dir, fit=True))
        if report.baselines(run_dir):
            parts.append("\n" + report.baseline_table(run_dir, self.best_us, fit=True))
        resumed = f" ({self.resumed_trials} recorded before this run)" if self.resumed_trials else ""
        parts.append(f"\ntrials by outcome: {_counts(self.outcomes)}" + resumed)
        if self.as_shipped is not None:
            parts.append(wrap(report.shipped_line(run_dir)))
        if self.best:
            kept = [name for name in ("report.md", "best/", "trials.jsonl") if (run_dir / name).exists()]
            parts.append(wrap(f"run directory: {run_dir} ({', '.join(kept)})"))
        return "\n".join(parts)

    def to_json(self) -> dict:
        """What `mage-tune search --json` prints: the best trial's record, then the run directory, the trials
        recorded before, the outcomes, the shipped config and why the search stopped."""
        said = {"run_dir": str(self.run_dir), "resumed_trials": self.resumed_trials, "outcomes": dict(self.outcomes)}
        said |= {"as_shipped": self.as_shipped, "stopped": self.stopped}
        return plain({**(self.best.line if self.best else {}), **said})


class NothingScored(MageError):
    """No trial of the search scored, so no report.md nor best/ was written; `result` holds what did run."""

    def __init__(self, message: str, *, file: str | None = None, result: SearchResult | None = None):
        super().__init__(message, file=file)
        self.result = result


class SearchInterrupted(KeyboardInterrupt):
    """Interrupted (Ctrl-C) while trials ran: the finished ones are kept in `run_dir`; the same call resumes."""

    def __init__(self, run_dir: Path):
        super().__init__(f"interrupted; finished trials are kept in {run_dir}: the same search resumes them")
        self.run_dir = run_dir


def search(
    family: FamilyArg,
    shape: Mapping[str, int] | None = None,
    *,
    arch: str | Arch | None = None,
    trials: int = 100,
    sampler: str = "tpe",
    static: bool = False,
    gpus: str | Sequence[int | str] | None = None,
    db: str | None = None,
    warm_start: str | bool = "auto",
    polish: int | None = None,
    keep_going_when_exhausted: bool = False,
    seed: int | None = None,
    run_dir: str | Path | None = None,
    study: str | None = None,
    storage: str | None = None,
    workers: int = 2,
    include_dirs: str | Sequence[str] = (),
    defines: str | Sequence[str] = (),
    compiler_options: str | Sequence[str] = (),
    progress: bool = False,
    echo: Echo | None = None,
) -> SearchResult:
    """Search `family`'s space at `shape` (a dict in its dimensions) as `mage-tune search` does, with the same
    defaults: suggest, compile, census, then check and time on this machine's GPU, or with `static=True` (or where
    no NVIDIA GPU is here, said through `echo` first) score with the census model. Every trial lands in `run_dir`
    (default runs/search-<study>) and the tuning database (`db`: a URL, or "off"); calling again with the same
    arguments resumes. `arch`: None or "auto" is the GPU's where measuring, else the default arch (sm_90) as the
    family builds for it (sm_90a for an sm_90a-only family).

    `gpus`: "all", "0,1" or [0, 1]: one measuring worker per GPU. `warm_start`: "auto", "off" (or False) or
    "other-shapes". `include_dirs`, `defines`, `compiler_options`: as -I, -D and --compiler-option. `progress`: a bar on
    stderr (on a terminal; a line per tenth of the trials in a log). `echo(line)` hears what the command says on
    stderr (the study, the warm start, why the search stopped); nothing is printed otherwise.

    Raises a MageError (OptionConflict for arguments that do not go together, NothingScored where no trial scored,
    its `result` attached), or SearchInterrupted (a KeyboardInterrupt) on Ctrl-C."""
    say = echo or quiet
    warm_start = {True: "auto", False: "off"}.get(warm_start, warm_start)  # type: ignore[arg-type]
    _check_arguments(trials, workers, sampler, warm_start, polish)
    fam, shape = family_and_shape(family, shape, include_dirs, defines, compiler_options)
    gpu_list = None
    if gpus is not None:
        if static:
            raise OptionConflict("--gpus measures on GPUs; --static measures nothing: give one of them")
        gpu_list = on_gpus.parse_gpus(gpus if isinstance(gpus, str) else ",".join(map(str, gpus)))
    if not static:
        mode_name, why = device.gpu_mode()  # a GPU here that cannot be used is an error, never a quiet static run
        if mode_name == "static":
            say(
                f"NOTICE: no CUDA device here: running the STATIC census model, not measurements ({why}; pass "
                "--static, or static=True from Python, to silence this)."
            )
            static, said = True, ""
        else:
            said = f"measuring on the GPU: {why}; "
            if arch in (None, "auto"):
                arch = fam.target_arch(device.arch_of_device())
    else:
        said = "static census model (--static), no GPU used; "
    # the caller's arch name as an Arch, once; "auto" without a GPU is the default arch as the family builds for it
    # there (matmul-bf16, sm_90a-only: sm_90a), as a search on such a GPU does
    arch = fam.default_target() if arch in (None, "auto") else get_arch(arch)
    mode = "static" if static else "measured"
    shape_text = "-".join(f"{k}{v}" for k, v in shape.items())
    study = study or f"{fam.name}-{shape_text}-{arch}-{mode}"
    run_path = Path(run_dir or Path("runs") / f"search-{study}")
    spec = SearchSpec(
        fam.name,
        shape,
        arch,
        trials,
        sampler,
        storage,
        study,
        run_path,
        workers,
        static,
        seed,
        fam.origin,
        warm_start=warm_start,
        db=db,
        polish=polish,
        source_options=getattr(fam, "extra_source_options", None),
        keep_going=keep_going_when_exhausted,
    )
    runner = Search(spec, fam, say)
    resumed = report.recorded_trials(runner.study)
    say(  # said once the run directory and study are known to match: a refused run says only why
        said
        + (
            f"resuming {resumed} recorded trial(s) of study {study} (asked for {trials})"
            + ("; nothing left to run: raise --trials to search on" if resumed >= trials else "")
            if resumed
            else f"new study {study}"
        )
    )
    for note in runner.warm_start():
        say(note)
    record.write_atomic(run_path / "search.json", spec_json(spec))
    record.add_environment(run_path, device.environment())
    _run(runner, spec, gpu_list, progress_bar(progress, trials, f"search {study}", "trial"), say)
    best = write_summary(spec, fam)
    lines = sorted(record.trials(run_path), key=lambda t: t["number"])
    result = SearchResult(
        family=fam.name,
        shape=dict(shape),
        arch=arch.name,
        mode=mode,
        study=study,
        run_dir=run_path,
        best=TrialRecord.from_line(best) if best else None,
        trials=tuple(TrialRecord.from_line(t) for t in lines),
        baselines=_baseline_times(run_path),
        context=_baseline_times(run_path, context=True),
        as_shipped=report.shipped(run_path),
        outcomes=report.outcome_counts(run_path),
        resumed_trials=resumed,
        stopped=runner.stopped or None,
    )
    if not best:  # nothing to report: a failure, never a result that names a report and a best/ never written
        first = next(iter(record.trials(run_path)), {})
        why = str(first.get("reason") or first.get("error") or "").strip().split("\n")[0][:200]
        example = f"; trial {first.get('number', '?')}: {why}" if why else ""
        raise NothingScored(
            f"no trial scored ({_counts(result.outcomes) or 'none ran here'}{example}), so no report.md nor best/ "
            "was written; this file says how each trial ended",
            file=str(run_path / "trials.jsonl"),
            result=result,
        )
    return result


def _check_arguments(trials: int, workers: int, sampler: str, warm_start: str, polish: int | None) -> None:
    """What the command line's option types check, for a call from Python; then the options that conflict."""
    if not 1 <= trials <= 1_000_000:  # 0 would end at once with an empty table
        raise InputError(f"trials={trials}: from 1 to 1000000")
    if not 1 <= workers <= 256:  # no compile process would run no trial, for ever
        raise InputError(f"workers={workers}: from 1 to 256")
    if sampler not in SAMPLERS:
        raise InputError(f"unknown sampler {sampler!r}; choose {', '.join(SAMPLERS)}")
    if warm_start not in WARM_STARTS:
        raise InputError(f"warm_start={warm_start!r}: one of {', '.join(WARM_STARTS)}")
    if polish is not None and polish < 0:
        raise InputError(f"polish={polish}: 0 or more")
    if sampler == "grid" and polish:
        raise OptionConflict("--polish does not apply to --sampler grid: the grid walks every config as it is")


def _run(runner: Search, spec: SearchSpec, gpu_list: list[str] | None, bar, say: Echo) -> None:
    """The trials, in this process or one measuring worker per GPU, with the progress shown on `bar`."""

    def progressed(done: int, best: float) -> None:
        bar.set(done, f"best {best:.2f} µs" if best < float("inf") else "best -")

    try:
        with storage_errors(spec):
            if gpu_list is not None:
                say(f"one measuring worker per GPU: {', '.join(gpu_list)}")
                runner.heartbeat.close()
                on_gpus.run_on_gpus(spec, runner.study, gpu_list, progressed, runner.polish_model)
            else:
                runner.run(progressed)
    except KeyboardInterrupt:
        bar.close()
        raise SearchInterrupted(spec.run_dir) from None
    finally:
        bar.close()


def _counts(outcomes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))


def _baseline_times(run_dir: Path, context: bool = False) -> dict[str, float]:
    """Label -> cold µs of each baseline that passed its check (the fastest session's, where several timed it); of
    the context-only ones instead with `context`."""
    times: dict[str, float] = {}
    for b in record.baselines(run_dir):
        r = b["result"]
        if is_context(r) != context:
            continue
        t = next((x["median_us"] for x in r["timings"] if x["regime"] == "cold"), None)
        if r["ok"] and t:
            times[r["label"]] = min(t, times.get(r["label"], t))
    return times
