"""The search loop: Optuna suggests, a process pool compiles ahead, the census prunes, the GPU (or the static
model) scores, and every trial lands in Optuna's storage and in the run directory's trials.jsonl.

Counting: a trial counts toward --trials once it carries an `outcome` user attr of COUNTED (measured, modelled,
pruned, compile_error, failed), and its trials.jsonl line is written right after that attr. A duplicate (a config
already tried, or the same SASS and launch as a scored trial) is recorded the same way, its value told to the
sampler, but never counts: a search runs --trials distinct kernels or stops. In a space small enough to list
(space.py) a trial whose draw, and every one-knob neighbour of it, was tried runs an untried valid config instead,
and once every valid config has been tried the search stops and says so (unless spec.keep_going); DUPLICATE_RUN
duplicates in a row also stop it, so a search whose sampler finds nothing new ends. Configs a family says build one
kernel (TritonFamily.equivalents: every num_stages of a kernel without a loop) are tried once between them: a draw
of one whose kernel was tried is redrawn as a tried one is, and the space is exhausted when its kernels are. A trial
whose process is killed before its outcome never gets one; once its heartbeat has been silent for the grace period
(storage.py: 30 s, or MAGE_TUNE_HEARTBEAT_GRACE) it is failed and a re-run of the same command takes its place, so no
finished trial is lost and none runs twice; a kill between a trial's outcome and its line leaves a counted trial
without one, and the search that reaches the count writes it from the study's attrs. Several workers on one study
share the count: a worker whose freshly asked trial would exceed it marks that trial `surplus` and stops. A trial
running elsewhere is counted as if it will count; one that ends a duplicate leaves its place to the next trial asked.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import signal
import time
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import UTC, datetime, timedelta

import optuna

from mage_tune import toolchain
from mage_tune.arch import Arch
from mage_tune.census import census_variant
from mage_tune.census.features import features
from mage_tune.errors import InputError, MageError
from mage_tune.kernels.base import Config, Family, Variant, block_json, block_text, config_label
from mage_tune.kernels.neighbours import config_key, neighbours
from mage_tune.kernels.pool import build_one, exit_with_parent
from mage_tune.kernels.recorded import family_digest, family_record
from mage_tune.measure import baseline_jobs, device, shipped, shipped_job_of, variant_job
from mage_tune.measure.baselines import is_context
from mage_tune.measure.records import Plan
from mage_tune.measure.worker import Measurer
from mage_tune.problem import Problem
from mage_tune.records.objectives import MEASURED_OBJECTIVE, STATIC_OBJECTIVE
from mage_tune.search import polish, record
from mage_tune.search.heartbeat import Heartbeat
from mage_tune.search.model import estimate_variant
from mage_tune.search.record import COUNTED, RECORDED
from mage_tune.search.samplers import SAMPLERS, make_sampler
from mage_tune.search.space import Space
from mage_tune.search.spec import SearchSpec, run_identity
from mage_tune.search.valid_draws import ValidDraws
from mage_tune.search.veto import census_veto
from mage_tune.storage import check_url, grace_s, open_storage, redact, storage_errors
from mage_tune.tuning import warm
from mage_tune.tuning.db import Recorder, RunInfo, TuningDB, default_url, run_name, versions

__all__ = ["COUNTED", "DUPLICATE_RUN", "RECORDED", "Search"]

DUPLICATE_RUN = 50  # duplicates in a row after which a search stops: its sampler finds nothing new
SAME_KERNELS_LISTED = 100_000  # the most configs of a listed space whose kernels a search counts (equivalents)


def _counted(study) -> tuple[int, int]:
    """(trials that count, trials running now in live workers)."""
    counted = running = 0
    cutoff = datetime.now() - timedelta(minutes=30)
    for t in study.get_trials(deepcopy=False):
        if t.user_attrs.get("outcome") in COUNTED:
            counted += 1
        elif t.state == optuna.trial.TrialState.RUNNING and (t.datetime_start or cutoff) > cutoff:
            running += 1
    return counted, running


def _earlier_live(study, number: int) -> int:
    n = 0
    for t in study.get_trials(deepcopy=False):
        if t.number >= number:
            continue
        if t.user_attrs.get("outcome") in COUNTED or t.state == optuna.trial.TrialState.RUNNING:
            n += 1
    return n


class Search:
    def __init__(self, spec: SearchSpec, family: Family, echo):
        self.spec, self.family, self.echo = spec, family, echo
        self.problem = Problem(family, spec.shape, spec.arch)
        self.objective = STATIC_OBJECTIVE if spec.static else MEASURED_OBJECTIVE
        if spec.db != "off":  # a --db that names no database is refused before anything is written; one that
            check_url(spec.db or default_url())  # cannot be reached is said once and the search goes on (Recorder)
        record.make_run_dir(spec.run_dir)
        about = {k: v for k, v in family_record(family).items() if k != "family"}
        # before the storage: a refused run touches nothing
        self.run_id = record.claim(spec.run_dir, run_identity(spec), about)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._settled: dict[int, dict] = {}  # trial number -> what _settle replaced of its draw, until _suggest
        self.storage = open_storage(spec.storage, spec.run_dir)
        with storage_errors(spec):
            self.study = optuna.create_study(
                study_name=spec.study,
                storage=self.storage,
                direction="minimize",
                sampler=self._sampler(),
                load_if_exists=True,
            )
            self._check_study_identity()
        self.measurer = None
        done = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        self.best_value = min((t.value for t in done if t.value is not None), default=math.inf)  # a resumed study's
        self.heartbeat = Heartbeat(self.storage)
        self.waiting_for: frozenset[int] = frozenset()  # trials running elsewhere this search last said it waits for
        self.baselines: dict[str, float] = {}
        self.recorder = None if spec.db == "off" else Recorder(spec.db, self.run_info())
        self.polish_trials = polish.default_trials(spec.trials, spec.sampler) if spec.polish is None else spec.polish
        self.polish_model = None  # the warm start's model, when it fitted one: it ranks the neighbours
        self.space: Space | None = None  # the valid configs, where the space is small enough to list (run())
        self._members: dict[str, bool] = {}  # config key -> whether it is one of the space's valid configs
        self._same: dict[str, dict[str, Config]] = {}  # config key -> the configs that build its kernel, by key
        self._kernels: int | None = None  # how many kernels a listed space's configs build, where they may share
        self.duplicates_in_a_row = 0
        self.stopped = ""  # why the search stopped before --trials counted, where it did
        self.shipped_job = None  # the family's as_shipped config, timed with the baselines of each session

    def _sampler(self):
        """The spec's sampler; TPE's and the random draws go through ValidDraws, so the study records the config each
        drawn trial runs (_settle), not the draw it ran instead of. The grid walks its points as they are; CMA-ES
        keeps its own relative draws."""
        sampler = make_sampler(self.spec.sampler, self.family, self.spec.seed)
        if SAMPLERS[self.spec.sampler].settled:
            domains = {k.name: list(k.domain) for k in self.family.knobs}
            return ValidDraws(sampler, domains, self._settle, lambda c: not self.problem.violations(c))
        return sampler

    def run_info(self):
        gpu = ""
        if not self.spec.static:
            gpu = device.gpu_name()
        return RunInfo(
            name=run_name(self.spec.study, self.run_id),
            family=self.family.name,
            origin=self.family.origin or self.family.name,
            run_id=self.run_id,
            family_digest=family_digest(self.family),
            defaults=self.family.with_defaults({}),
            shape=dict(self.spec.shape),
            arch=self.spec.arch.name,
            objective=self.objective,
            gpu=gpu,
            toolchain=versions(toolchain.fingerprint()),
            where=str(self.spec.run_dir.resolve()),  # an import hint works from any folder
        )

    def warm_start(self) -> tuple[str, ...]:
        """Enqueue the tuning database's seeds ahead of the sampler, once, into a study with no trial yet."""
        if self.spec.warm_start == "off" or self.spec.db == "off":
            return ("warm start: off",)
        if self.study.get_trials(deepcopy=False):
            return ()
        try:
            db = self.recorder.db if self.recorder and self.recorder.db else TuningDB(self.spec.db)
            entries = _family_entries(db, self.family, self.spec.arch)
        except Exception as exc:  # the database is a convenience: a search without its warm start still runs
            first = (str(exc).strip().splitlines() or [""])[0]
            why = f"warm start: skipped, the tuning database cannot be read ({type(exc).__name__}: {redact(first)})"
            cold = warm.cold_start(self.problem, why)  # nothing known here either: the family's defaults first
            self._enqueue(cold.seeds)
            return cold.notes
        plan = warm.plan(
            self.problem,
            entries,
            self.recorder.run.gpu if self.recorder else "",
            self.spec.warm_start == "other-shapes",
            self.spec.workers,
            self.spec.seed,
        )
        self._enqueue(plan.seeds)
        self.polish_model = plan.model
        return plan.notes + _other_code_note(self.family, entries)

    def _enqueue(self, seeds) -> None:
        """Seeds run first, in order, each once, its source kept for the report."""
        for seed in seeds:
            self.study.enqueue_trial(seed.config, user_attrs={"source": seed.source}, skip_if_exists=True)

    def _check_study_identity(self) -> None:
        identity = {
            "objective": self.objective,
            "family": self.spec.family,
            "shape": self.spec.shape,
            "arch": self.spec.arch.name,
        }
        attrs = self.study.user_attrs
        for key, value in identity.items():
            if key in attrs and attrs[key] != value:
                raise InputError(
                    f"study {self.spec.study!r} was made with {key} = {attrs[key]!r}, not {value!r}: modelled and "
                    f"measured values (or different problems) never share a study; use another --study or --run-dir"
                )
        for key, value in identity.items():
            if key not in attrs:
                self.study.set_user_attr(key, value)

    # --- one trial ------------------------------------------------------------------------------------------------
    def _suggest(self, trial) -> tuple[Config, list[str]]:
        """The sampler's config and what makes it invalid ([] for a valid one), its constraints checked once: a drawing
        sampler's proposal that breaks a constraint becomes its nearest valid config (at most two other knobs
        changed; the trial keeps `repaired_from`, the proposed values). The sampler knows no constraint, and
        in a constrained space such as matmul's about half its draws would be invalid, each a trial spent on
        nothing. A draw no two changes repair has more of its knobs redrawn at random (Family.redrawn_valid): only
        one with no valid config found so is pruned. The grid walks its points as they are. Whatever it returns
        valid is valid by a check made in _settle (or by construction: a repair, a neighbour, a listed space's
        config), so the trial's build and the space's count take it as checked. A draw through ValidDraws was
        settled before Optuna recorded it; an enqueued trial's fixed params, and CMA-ES's draws, are settled here."""
        proposal = {k.name: trial.suggest_categorical(k.name, list(k.domain)) for k in self.family.knobs}
        if self.spec.sampler == "grid":
            return proposal, self.problem.violations(proposal)
        # A draw through ValidDraws was settled as it was drawn, and is not settled again: a trial another worker
        # started since could move it off the config the study records.
        config = proposal if trial.number in self._settled else self._settle(trial.number, proposal)
        notes = self._settled.pop(trial.number, None)
        if notes is None:  # no repair makes it valid: pruned with its why
            return proposal, self.problem.violations(proposal)
        for key, value in notes.items():
            trial.set_user_attr(key, value)
        return config, []  # valid by a check in _settle, or by construction (a repair, a neighbour, a listed config)

    def _settle(self, number: int, drawn: Config) -> Config:
        """ValidDraws' settle: the config a sampler's draw runs as (repaired where invalid, then an untried
        neighbour where tried), so the study records that config and the sampler learns from what ran. What it
        replaced waits in self._settled for _suggest to keep as the trial's repaired_from and redrawn_from. A draw
        no repair makes valid stays as drawn, with no entry there: _suggest prunes it with its why."""
        config, notes = drawn, {}
        if self.problem.violations(drawn):
            repaired = self._repaired(number, drawn)
            if repaired is None:
                return drawn
            notes["repaired_from"] = {k: v for k, v in drawn.items() if repaired[k] != v}
            config = repaired
        picked, replaced = self._untried_pick(number, config)
        if replaced:
            notes["redrawn_from"] = replaced
        self._settled[number] = notes
        return picked

    def _repaired(self, number: int, proposal: Config) -> Config | None:
        """The nearest valid config to an invalid proposal (at most two knobs changed), else one with more of its
        knobs redrawn at random, seeded by the trial; None where neither finds one."""
        shape, arch = self.problem.shape, self.problem.arch
        repaired = self.family.nearest_valid(proposal, shape, arch, min_changes=1)
        if repaired is None:  # no two knobs repair it: more are redrawn, so the trial still runs a kernel
            rng = random.Random(f"{self.spec.seed}-{number}")
            repaired = self.family.redrawn_valid(proposal, shape, arch, rng)
        return repaired

    def _untried(self, trial, config: Config, drawn: Config | None = None) -> Config:
        """_untried_pick for a trial, which keeps the values it replaced as `redrawn_from`."""
        pick, replaced = self._untried_pick(trial.number, config, drawn)
        if replaced:
            trial.set_user_attr("redrawn_from", replaced)
        return pick

    def _untried_pick(self, number: int, config: Config, drawn: Config | None = None) -> tuple[Config, dict]:
        """A config this study has already tried would only be handed its first value back (the duplicate check), so
        an untried one-knob neighbour of it runs instead where there is one, the model's pick where there is a model
        (search/polish.py), with the values it replaced ({} where `config` itself runs). A sampler such as TPE redraws
        its best configs: 7-23 % of the trials of each earlier 100-trial layer-norm search under runs/ repeated one.
        `drawn`: what the replaced values are against (default `config`; _claim redraws a config redrawn already)."""
        others = [t for t in self.study.get_trials(deepcopy=False) if t.number != number]
        tried = set(self._same_kernels(polish.tried_keys(others)))
        if config_key(config) not in tried:
            return config, {}
        found = list(neighbours(self.family, [(f"#{number}", config)], self.problem.shape, self.problem.arch, tried))
        if found:
            ranked = polish.ranked(self.problem, found, self.polish_model, number)
            pick = ranked[0].config
        else:  # every neighbour tried too: any untried config of a space small enough to list
            taken = set(self._same_kernels(_taken(others)))
            pick = self.space.untried(taken, f"{self.spec.seed}-{number}") if self.space else None
            if pick is None:
                return config, {}  # nothing untried: it runs again, a duplicate where it was scored
        return pick, {k: v for k, v in (drawn or config).items() if pick[k] != v}

    def _claim(self, trial, config: Config) -> Config | None:
        """Set the config the trial runs where other workers see it; where another running trial has set the same
        one (two workers drew it at once), draw again. Of two claims of one config at least the later reader sees
        the other, so no config runs twice at once. Where nothing untried is left to draw, None (unless
        spec.keep_going): the trial stands down (surplus) rather than score the config beside the other before
        either has finished to make it a duplicate (both would count). After a few draws the trial runs what it has
        (at worst a duplicate)."""
        drawn = {**config, **trial.user_attrs.get("redrawn_from", {})}
        trial.set_user_attr("config", config)
        for _ in range(3):
            if not self._sampler_draws or not any(
                t.number != trial.number
                and t.state == optuna.trial.TrialState.RUNNING
                and t.user_attrs.get("config") == config
                for t in self._trials()
            ):
                return config
            again = self._untried(trial, config, drawn)
            if again == config:
                return config if self.spec.keep_going else None  # keep_going asks for duplicates: they never count
            config = again
            trial.set_user_attr("config", config)
        return config

    @property
    def _sampler_draws(self) -> bool:
        """The grid walks its points as they are; every other sampler's draws are redrawn where tried."""
        return self.spec.sampler != "grid"

    def _finish(self, trial, outcome: str, value: float | None, attrs: dict) -> None:
        """The outcome attr makes the trial count, so its trials.jsonl line follows it at once, before the tell: a
        process killed between outcome and tell leaves a counted trial with its line (value included), which the
        heartbeat then fails in the study; killed before the outcome, the trial does not count and runs again."""
        attrs = {**attrs, "source": trial.user_attrs.get("source") or self.spec.sampler}
        for key in ("repaired_from", "redrawn_from"):
            if trial.user_attrs.get(key):
                attrs[key] = trial.user_attrs[key]
        try:
            where = {"run_dir": str(self.spec.run_dir.resolve()), "value": value}  # what a line restored needs
            for key, val in {**attrs, **where, "outcome": outcome}.items():
                trial.set_user_attr(key, val)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Another worker finished this trial first: its heartbeat went silent and it was failed, or both popped
            # it from the queue of enqueued trials (a storage without SQLite's immediate transactions or a row lock
            # for Optuna's check). It counts once, as that worker recorded it; this result is dropped.
            self.heartbeat.discard(trial)
            self.echo(f"trial {trial.number} was finished by another worker first; this result of it is dropped")
            return
        self.duplicates_in_a_row = self.duplicates_in_a_row + 1 if outcome == "duplicate" else 0
        record.append_trial(
            self.spec.run_dir,
            {
                "number": trial.number,
                "outcome": outcome,
                "value": value,
                "objective": self.objective,
                **attrs,
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        if self.recorder is not None:
            self.recorder.trial(
                trial.number, attrs.get("config", {}), outcome, value, attrs.get("census"), attrs["source"]
            )
        self.heartbeat.discard(trial)
        # finished meanwhile (failed as stale by a worker that missed its beats): its line and attrs stand, no crash
        if outcome in ("measured", "modelled", "duplicate"):
            self.study.tell(trial, value, skip_if_finished=True)
            self.best_value = min(self.best_value, value)
        else:
            # A variant that failed to build, launch or check is told as pruned, like one the census vetoed: TPE ranks
            # pruned trials below every measured one, but leaves failed ones out, and then keeps drawing the knob
            # value that fails (42 of 100 trials at one FP32-accurate shape did, each over the accuracy bar).
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED, skip_if_finished=True)

    def _duplicate_of(self, key: str, value_attr: str) -> tuple[int, float] | None:
        for t in self.study.get_trials(deepcopy=False):
            if (
                t.user_attrs.get(value_attr) == key
                and t.user_attrs.get("outcome") in ("measured", "modelled")
                and t.state == optuna.trial.TrialState.COMPLETE  # not one a kill left without its value
            ):
                return t.number, t.value
        return None

    def _score(self, trial, config: Config, built: Variant | MageError) -> None:
        attrs: dict = {"config": config, "label": config_label(self.family.name, config)}
        if isinstance(built, MageError):
            self._finish(trial, "compile_error", None, {**attrs, "error": str(built)})
            return
        census = census_variant(built)
        attrs |= {
            "census": features(census),
            "cubin_sha256": built.artifact.cubin_sha256,
            "sass_sha256": record.sha256(built.artifact.sass or ""),
            "grid": list(built.launch.grid),
            "block": block_json(built.block),
        }
        why = census_veto(census)
        if why:
            self._finish(trial, "pruned", None, {**attrs, "reason": why})
            return
        attrs["run_key"] = run_key(attrs["sass_sha256"], built, census)
        same = self._duplicate_of(attrs["run_key"], "run_key")
        if same:
            self._finish(trial, "duplicate", same[1], {**attrs, "duplicate_of": same[0]})
            return
        if self.spec.static:
            value, parts = estimate_variant(self.family, built, census)
            self._finish(trial, "modelled", value, {**attrs, "model": parts})
            return

        result = self.measurer.measure(variant_job(built))
        attrs |= {"measurement": result.to_json(), "session": result.session}
        if not result.ok:
            self._finish(trial, "failed", None, {**attrs, "error": result.error})
            return
        self._finish(trial, "measured", result.time("cold"), attrs)

    # --- the loop -------------------------------------------------------------------------------------------------
    def run(self, progress) -> None:
        self.space = Space.listed(self.problem)
        if self.space is not None and not self.space.size:  # no valid config: the draws are pruned, each with its why
            self.space = None
        if self.space is not None and hasattr(self.family, "equivalents") and self.space.size <= SAME_KERNELS_LISTED:
            listed = (self.space.config(i) for i in range(self.space.size))
            self._kernels = len({self._kernel_of(config_key(c), c) for c in listed})
        self._prepare_shipped()
        if not self.spec.static:
            self._start_measurer()
        pool = ProcessPoolExecutor(max(1, self.spec.workers), initializer=_compile_worker_init)
        try:
            while True:
                counted, running = _counted(self.study)
                progress(counted, self.best_value)
                if counted >= self.spec.trials or self._stops(counted):
                    self._restore_lines()
                    return
                left = self._untried_left()
                if counted + running >= self.spec.trials or (left == 0 and running):  # the last ones run elsewhere
                    self._fail_stale()
                    self._say_waiting(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
                    time.sleep(2)
                    continue
                room = min(self.spec.workers, self.spec.trials - counted - running, left or self.spec.workers)
                polish_from = self.spec.trials - self.polish_trials
                if counted >= polish_from:
                    self._polish(room)
                else:  # the sampler's last batch stops where the polish starts, so the polish gets all its trials
                    room = min(room, polish_from - counted)
                batch = []
                for _ in range(room):
                    with warnings.catch_warnings():  # Optuna warns that ask() skips its heartbeat: ours beats
                        warnings.simplefilter("ignore", UserWarning)
                        trial = self.study.ask()
                    self.heartbeat.add(trial)
                    if _earlier_live(self.study, trial.number) >= self.spec.trials:
                        self._mark(trial, "surplus")
                        break
                    config, problems = self._suggest(trial)
                    if not problems:
                        claimed = self._claim(trial, config)  # other workers avoid it
                        if claimed is None:  # another running trial holds the last untried config
                            self._mark(trial, "surplus")
                            continue
                        config = claimed
                    self._checked(config, not problems)
                    if problems:
                        self._finish(
                            trial,
                            "pruned",
                            None,
                            {
                                "config": config,
                                "reason": "; ".join(problems),
                                "label": config_label(self.family.name, config),
                            },
                        )
                        continue
                    batch.append(
                        (
                            trial,
                            config,
                            # checked in _suggest: the build does not check it again
                            pool.submit(build_one, self.family, config, self.problem.shape, self.problem.arch, True),
                        )
                    )
                for trial, config, future in batch:
                    self._score(trial, config, _result(future))
        finally:
            pool.shutdown(cancel_futures=True)
            self.heartbeat.close()
            if self.measurer is not None:
                self.measurer.close()

    def _stops(self, counted: int) -> bool:
        """Whether the search ends before --trials count: every valid config of a listed space tried (unless
        spec.keep_going), or DUPLICATE_RUN duplicates in a row. Said once, as it happens."""
        trials = f"{counted} trial" + ("" if counted == 1 else "s")
        if self.duplicates_in_a_row >= DUPLICATE_RUN:
            why = (
                f"the last {DUPLICATE_RUN} trials were all duplicates of configs already tried (recorded, never "
                f"counted): the sampler finds nothing new; stopping after {trials}"
            )
        elif self._exhausted():
            verb = "modelled" if self.spec.static else "measured"
            same = " (or build the same kernel as one that has)" if hasattr(self.family, "equivalents") else ""
            why = f"all {self.space.size} valid configs of the space have been {verb}{same}; stopping after {trials}"
        else:
            return False
        if why != self.stopped:
            self.echo(why)
        self.stopped = why
        return True

    def _exhausted(self) -> bool:
        """Every valid config of a listed space has run (and spec.keep_going is off)."""
        if self.space is None or self.spec.keep_going:
            return False
        return self._valid(self._same_kernels(_done(self._trials()))) >= self.space.size

    def _untried_left(self) -> int | None:
        """How many valid configs of a listed space no trial has run nor runs now (None: unknown, or spec.keep_going,
        which draws on whatever is left)."""
        if self.space is None or self.spec.keep_going:
            return None
        taken = _taken(self._trials())
        if self._kernels is not None:  # by kernel: the configs left may build fewer
            return self._kernels - len({self._kernel_of(k, c) for k, c in taken.items() if self._valid({k: c})})
        return self.space.size - self._valid(self._same_kernels(taken))

    def _same_kernels(self, keys) -> dict[str, dict]:
        """Key -> config of `keys` (configs by key, or keys) and of every config that builds the same kernel as one
        of them (TritonFamily.equivalents: each num_stages of a kernel without a loop to pipeline), so a search
        redraws those as it redraws a config already tried, and counts them tried."""
        configs = keys if isinstance(keys, dict) else {key: json.loads(key) for key in keys}
        equivalents = getattr(self.family, "equivalents", None)
        if equivalents is None:
            return configs
        out = dict(configs)
        for key, config in configs.items():
            if key not in self._same:
                same = equivalents(config, self.spec.shape, self.spec.arch) if config else [config]
                self._same[key] = {config_key(c): c for c in same}
            out.update(self._same[key])
        return out

    def _kernel_of(self, key: str, config: Config) -> str:
        """The kernel a config builds, named by the least key of the configs that build it."""
        return min(self._same_kernels({key: config}))

    def _checked(self, config: Config, valid: bool) -> None:
        """Keep what _suggest found of a trial's config, so the listed space's count does not check it again."""
        if self.space is not None:
            self._members.setdefault(config_key(config), self.space.member(config, valid))

    def _valid(self, keys: dict[str, dict]) -> int:
        """How many of these configs (by key) are the listed space's."""
        for key, config in keys.items():
            if key not in self._members:
                self._members[key] = self.space.member(config)
        return sum(self._members[key] for key in keys)

    def _trials(self) -> list:
        return self.study.get_trials(deepcopy=False)

    def _polish(self, room: int) -> None:
        """Enqueue up to `room` untried neighbours of the best few configs, unless enqueued trials still wait."""
        trials = self.study.get_trials(deepcopy=False)
        if any(t.state == optuna.trial.TrialState.WAITING for t in trials):
            return
        tried = set(self._same_kernels(polish.tried_keys(trials)))
        scored = [
            t
            for t in trials
            if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("outcome") in ("measured", "modelled")
        ]
        bases: list[tuple[str, Config]] = []
        for t in sorted(scored, key=lambda t: t.value):
            if all(t.user_attrs["config"] != config for _, config in bases):
                bases.append((f"#{t.number}", t.user_attrs["config"]))
            if len(bases) == polish.BASES:
                break
        found = list(neighbours(self.family, bases, self.problem.shape, self.problem.arch, tried))
        measured = [(t.user_attrs["config"], t.value) for t in scored]
        order = polish.ranked(self.problem, found, self.polish_model, self.spec.seed, measured)
        # counted again: another worker may have taken trials while these were ranked, and a trial enqueued past the
        # count would wait, never asked, once every worker has stopped
        counted, running = _counted(self.study)
        room = min(room, self.spec.trials - counted - running)
        for n in order[:room]:
            self.study.enqueue_trial(n.config, user_attrs={"source": n.source}, skip_if_exists=True)

    def _restore_lines(self) -> None:
        """A kill between a trial's outcome attr and its trials.jsonl line leaves it counted without a line. Once
        such a trial of this run directory (its `run_dir` attr) runs nowhere (its silent heartbeat got it failed),
        its line is written from the study's attrs, so the run directory holds every counted trial. A kill after
        the line but before the study was told leaves a counted trial marked running: the search waits for that
        one too, so it ends with no trial of its run directory still running. Waits at most the heartbeat grace
        (plus a margin); a live worker tells its trial, and writes its line, within milliseconds."""
        deadline = time.monotonic() + grace_s() + 5
        while True:
            self._fail_stale()
            ours = str(self.spec.run_dir.resolve())  # workers on one study may keep separate run directories
            # the study first, then the lines: a worker writes a trial's line before it tells the study, so a trial
            # told by then has its line by the time the file is read
            counted = [
                t
                for t in self.study.get_trials(deepcopy=False)
                if t.user_attrs.get("outcome") in RECORDED and t.user_attrs.get("run_dir") == ours
            ]
            lined = {t["number"] for t in record.trials(self.spec.run_dir)}
            for t in counted:
                if t.state != optuna.trial.TrialState.RUNNING and t.number not in lined:
                    attrs = {k: v for k, v in t.user_attrs.items() if k != "run_dir"}
                    record.append_trial(self.spec.run_dir, {"number": t.number, "objective": self.objective, **attrs})
            if all(t.state != optuna.trial.TrialState.RUNNING for t in counted) or time.monotonic() > deadline:
                return
            self._say_waiting([t for t in counted if t.state == optuna.trial.TrialState.RUNNING])
            time.sleep(1)

    def _say_waiting(self, running) -> None:
        """Say, once for each new set, which trials the search waits for: a live worker ends its own within seconds,
        a stopped process's are given up once their heartbeat has been silent for the grace period."""
        numbers = frozenset(t.number for t in running if t._trial_id not in self.heartbeat.live)
        if numbers and numbers != self.waiting_for:
            listed = ", ".join(map(str, sorted(numbers)))
            self.echo(
                f"waiting for trial(s) {listed}, running elsewhere: a live worker ends its own; a stopped process's "
                f"are given up after {grace_s()} s without a heartbeat"
            )
        self.waiting_for = numbers

    def _mark(self, trial, outcome: str) -> None:
        trial.set_user_attr("outcome", outcome)
        self.heartbeat.discard(trial)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _fail_stale(self) -> None:
        self.heartbeat.adopt(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
        with contextlib.suppress(Exception), warnings.catch_warnings():  # journal files without heartbeats: nothing
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)

    def _prepare_shipped(self) -> None:
        """Build the family's as_shipped config here: a measured search times it with the baselines of every session,
        a static one models it like a trial. shipped.json says which, with the value where modelled, or the one line
        that says why it is left out (said here too)."""
        self.shipped_job = None
        if self.family.as_shipped is None:
            return
        variant, note = shipped.build(self.problem)
        if variant is None:
            self.echo(note)
            record.write_shipped(self.spec.run_dir, {"error": note, "objective": self.objective})
            return
        label = shipped.label(self.family, variant.config)
        data = {"label": label, "config": variant.config, "objective": self.objective}
        if self.spec.static:
            value, parts = estimate_variant(self.family, variant, census_variant(variant))
            data |= {"value": value, "model": parts}
        else:
            self.shipped_job = shipped_job_of(self.family, variant)
        record.write_shipped(self.spec.run_dir, data)

    def _start_measurer(self) -> None:
        device.require_gpu()
        plan = Plan(
            family=self.family.origin or self.family.name,
            shape=dict(self.spec.shape),
            jobs=(),
            regimes=("cold",),
            seed=self.spec.seed or 0,
        )
        self.measurer = Measurer(
            plan,
            baseline_jobs(self.family, self.spec.shape) + ([self.shipped_job] if self.shipped_job else []),
            on_result=self._baseline_measured,
        )
        self.measurer.start()

    def _baseline_measured(self, result) -> None:
        if result.kind == "variant" and not shipped.is_shipped(result):
            return
        result = shipped.recorded(result)
        record.append_baseline(self.spec.run_dir, result, self.measurer.sessions[-1])
        # the tuning database measures a run against other kernels (its model's reference), not the family's own,
        # and not a context-only one, which is not held to the family's accuracy
        if result.ok and self.recorder is not None and result.kind != shipped.KIND and not is_context(result):
            self.baselines[result.label] = result.time("cold")
            self.recorder.baselines(dict(self.baselines))


def _done(trials) -> dict[str, dict]:
    """Key -> config of every config a trial has run to its end (a recorded outcome, duplicates included)."""
    return {
        config_key(t.user_attrs["config"]): t.user_attrs["config"]
        for t in trials
        if t.user_attrs.get("outcome") in RECORDED and isinstance(t.user_attrs.get("config"), dict)
    }


def _taken(trials) -> dict[str, dict]:
    """Key -> config of every config run to its end or running now (what it runs, set before its build; its draw
    until then). A trial a killed process left (failed without an outcome) takes none: its config is still to run."""
    taken = _done(trials)
    for t in trials:
        config = t.user_attrs.get("config") or t.params
        if t.state == optuna.trial.TrialState.RUNNING and isinstance(config, dict) and config:
            taken[config_key(config)] = config
    return taken


def _family_entries(db, family: Family, arch: Arch) -> list:
    """The family's measured entries for this arch: found by origin (a user's family file), else by name."""
    entries = list(db.entries(family=family.origin or family.name, arch=arch.name, objective=MEASURED_OBJECTIVE))
    if not entries and family.origin and family.origin != family.name:
        entries = list(db.entries(family=family.name, arch=arch.name, objective=MEASURED_OBJECTIVE))
    return entries


def _other_code_note(family: Family, entries: list) -> tuple[str, ...]:
    """Say (not trust silently) that some of the database's runs were made by other code of this family."""
    digest = family_digest(family)
    runs = {e.run.name: e.run.family_digest for e in entries}
    other = sum(1 for d in runs.values() if d and d != digest)
    if not other:
        return ()
    return (
        f"warm start: {other} of {len(runs)} run(s) of {family.name} in the tuning database were made by other code "
        "of it (the family file's sha256 differs); their configs are read as the family is now",
    )


def _compile_worker_init() -> None:
    """Compile processes leave Ctrl-C to the search (which shuts them down), so none prints a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent()


def _result(future: Future):
    try:
        return future.result()
    except Exception as exc:  # a crashed compile process: a failed trial, not a crashed search
        return MageError(f"compile worker failed: {type(exc).__name__}: {exc}")


def run_key(sass_sha256: str, built: Variant, census) -> str:
    """What makes two trials the same run. Same SASS is the same kernel, but not the same run unless the launch is the
    same too: layer norm's persist values share one kernel and differ in the grid, and a cluster shape lives in the
    cubin's attributes, not in its SASS (matmul-bf16's cluster=2 without multicast runs cluster=1's instructions in
    pairs of blocks on one GPC)."""
    block, dynamic = block_text(built.block), built.launch.dynamic_shared
    cluster = census.cluster.dims if census.cluster is not None else None
    return f"{sass_sha256} grid={list(built.launch.grid)} block={block} dyn={dynamic} cluster={cluster}"
