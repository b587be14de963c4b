"""mage_tune.autotune's benchmark of a kernel without a family: every config launched in this process on clones of the
caller's tensors, checked against the others, and timed as the harness times (measure/harness.py).

What it does, per unknown key (docs/autotune.md says what it does not):

* **Clones.** Every tensor argument is cloned into buffer sets, enough to touch 256 MB (the harness's cold bytes;
  at most half the free device memory); the caller's tensors are only read. The call's other arguments pass as they
  are.
* **What the kernel writes.** The first config that launches is run once from the caller's values: the tensors it
  changed are its outputs or in-place buffers; each of those (or, where it changed none, each floating one) is
  filled with NaN and the config run again: one it writes whole is an output, the rest are in-place and restored
  (with `restore_value`, and `reset_to_zero` zeroed) before every launch that is timed.
* **Checked against each other.** Each config runs once from the caller's values; what it wrote is compared with
  what the others wrote (relative L2 error per tensor within TOLERANCE of its dtype, NaN and inf in the same places,
  integers equal). The largest group of configs that agree is taken as right; a config outside it, or one that
  raises (a compile error, out of resources), fails and is not timed. There is no reference: configs that all
  agree on a wrong result pass.
* **Timed as the harness times.** harness.single_launch_us, then harness.time_graph: a CUDA graph of launches
  rotating over the sets (one launch per set, each restored, where the kernel updates buffers in place), replayed
  `rounds` times, checked to write its outputs; the median per-launch µs is the config's time, the meaning of the
  tuning database's measured objective.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mage_tune import gpu
from mage_tune.errors import InputError
from mage_tune.measure import harness

SINGLE_REPEATS = 20  # the launches harness.single_launch_us times
COLD_BYTES = 256 * 2**20  # as measure.records.Plan.cold_bytes: 4x an H200's L2
TOLERANCE = {"float64": 1e-10, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}  # relative L2 between configs
OTHER_FLOAT_TOLERANCE = 0.1  # fp8 and the like


@dataclass(frozen=True)
class Timed:
    """One config's outcome: its median µs per launch (None: failed, `error` says why) and the launches timed."""

    index: int
    time_us: float | None
    error: str = ""
    launches: int = 0


def measure(
    fn,
    launches: Sequence[dict],
    args: tuple,
    kwargs: dict,
    grid,
    arg_names: Sequence[str],
    *,
    reset_to_zero: Sequence[str] = (),
    restore_value: Sequence[str] = (),
    rounds: int = 7,
    hooks: Sequence[Callable | None] | None = None,
) -> list[Timed]:
    """Check and time `fn` launched with each of `launches` (the keyword arguments each config adds) on clones of
    this call's tensors; one Timed per config, in order."""
    torch = gpu.torch()
    if torch.cuda.is_current_stream_capturing():
        raise InputError(
            "mage_tune.autotune: this key is not answered yet, and benchmarking it cannot happen inside a CUDA graph "
            "capture: launch the kernel once at this key before capturing"
        )
    named = {**dict(zip(arg_names, args, strict=False)), **kwargs}
    tensors = {n: v for n, v in named.items() if torch.is_tensor(v)}
    if not tensors:
        raise InputError("mage_tune.autotune: the call passes no tensor: nothing to benchmark on")
    with torch.cuda.device(next(iter(tensors.values())).device):
        bench = _Bench(fn, list(launches), args, kwargs, grid, list(arg_names), tensors, reset_to_zero,
                       restore_value, hooks)  # fmt: skip
        try:
            return bench.run(rounds)
        finally:
            bench.sets.clear()  # the clones go back to torch's allocator
            torch.cuda.synchronize()


class _Bench:
    def __init__(self, fn, launches, args, kwargs, grid, arg_names, tensors, reset_to_zero, restore_value, hooks):
        torch = gpu.torch()
        self.fn, self.launches, self.args, self.kwargs, self.grid = fn, launches, args, kwargs, grid
        self.arg_names, self.tensors = arg_names, tensors
        self.hooks = list(hooks) if hooks is not None else [None] * len(launches)
        self.zero = [n for n in reset_to_zero if n in tensors]
        self.restore_value = [n for n in restore_value if n in tensors]
        per_set = max(1, sum(t.numel() * t.element_size() for t in tensors.values()))
        free = torch.cuda.mem_get_info()[0]
        count = min(max(2, math.ceil(COLD_BYTES / per_set)), harness.MAX_LAUNCHES, max(1, free // 2 // per_set))
        self.sets = [{n: t.clone() for n, t in tensors.items()} for _ in range(count)]

    def launcher(self, index: int) -> Callable[[dict], None]:
        extra, hook = self.launches[index], self.hooks[index]

        def launch(bufs: dict) -> None:
            args = [bufs.get(n, a) for n, a in zip(self.arg_names, self.args, strict=False)]
            kwargs = {k: bufs.get(k, v) for k, v in self.kwargs.items()}
            if hook is not None:
                hook({**dict(zip(self.arg_names, args, strict=False)), **kwargs, **extra})
            self.fn.run(*args, grid=self.grid, warmup=False, **kwargs, **extra)

        return launch

    def fresh(self, names) -> None:
        """The first set's `names` back to the caller's values, the reset_to_zero ones zeroed."""
        first = self.sets[0]
        for n in names:
            first[n].copy_(self.tensors[n])
        for n in self.zero:
            first[n].zero_()

    def restore(self, sets: list[dict], names: list[str]) -> None:
        for s in sets:
            for n in names:
                s[n].copy_(self.tensors[n])
            for n in self.zero:
                s[n].zero_()

    def run(self, rounds: int) -> list[Timed]:
        torch = gpu.torch()
        results: dict[int, Timed] = {}
        found = None
        for index in range(len(self.launches)):
            try:
                found = self.written(self.launcher(index))
                break
            except Exception as exc:  # Triton's OutOfResources, a compile error: this config fails, not the key
                results[index] = Timed(index, None, _why(exc))
        if found is None:
            return [results[i] for i in sorted(results)]
        written, inplace = found
        restored = sorted(set(inplace) | set(self.restore_value) | set(self.zero))
        watched = list(dict.fromkeys([*written, *restored]))
        agreed = self.agreeing([i for i in range(len(self.launches)) if i not in results], watched, results)
        for index in agreed:
            launch = self.launcher(index)
            try:
                if restored:  # in place: a set per launch, each restored before every replay (the harness's way)
                    single = harness.single_launch_us(launch, self.sets[0], SINGLE_REPEATS,
                                                      lambda: self.restore(self.sets[:1], restored))  # fmt: skip
                    count = len(self.sets)
                    again = lambda: self.restore(self.sets, restored)  # noqa: E731
                else:
                    single = harness.single_launch_us(launch, self.sets[0], SINGLE_REPEATS)
                    count, again = harness.plan_launches(single), None
                samples = harness.time_graph(launch, self.sets, count, rounds, again, tuple(written), tuple(restored))
            except Exception as exc:
                results[index] = Timed(index, None, _why(exc))
                continue
            results[index] = Timed(index, statistics.median(samples), "", SINGLE_REPEATS + count * rounds)
        torch.cuda.synchronize()
        return [results[i] for i in sorted(results)]

    def written(self, launch) -> tuple[list[str], list[str]]:
        """(outputs the kernel writes whole, tensors it updates in place), from one config (module docstring)."""
        torch = gpu.torch()
        names = list(self.tensors)
        first = self.sets[0]
        self.fresh(names)
        launch(first)
        torch.cuda.synchronize()
        changed = [n for n in names if n not in self.zero and not _same(first[n], self.tensors[n])]
        whole = []
        for n in [n for n in (changed or names) if self.tensors[n].is_floating_point() and n not in self.zero]:
            self.fresh(names)
            first[n].fill_(float("nan"))
            launch(first)
            torch.cuda.synchronize()
            if not bool(torch.isnan(first[n]).any()):
                whole.append(n)
        return whole, [n for n in changed if n not in whole]

    def agreeing(self, indices: list[int], watched: list[str], results: dict[int, Timed]) -> list[int]:
        """The configs of the largest group whose results agree; the others get a failed Timed in `results`."""
        torch = gpu.torch()
        groups: list[tuple[dict, list[int]]] = []
        for index in indices:
            try:
                self.fresh(list(self.tensors))
                self.launcher(index)(self.sets[0])
                torch.cuda.synchronize()
            except Exception as exc:
                results[index] = Timed(index, None, _why(exc))
                continue
            got = {n: self.sets[0][n].clone() for n in watched}
            for rep, members in groups:
                if all(_close(rep[n], got[n]) for n in watched):
                    members.append(index)
                    break
            else:
                groups.append((got, [index]))
        if not groups:
            return []
        winners = max(groups, key=lambda g: (len(g[1]), -g[1][0]))[1]
        ran = sum(len(members) for _, members in groups)
        for _, members in groups:
            if members is not winners:
                for index in members:
                    results[index] = Timed(
                        index, None, f"its result differs from that of {len(winners)} of the {ran} configs that ran"
                    )
        return winners


def _same(a, b) -> bool:
    """Bit for bit the same values, NaN where the other has NaN."""
    torch = gpu.torch()
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def _close(a, b) -> bool:
    """Whether two results of one tensor agree: integers equal; floats NaN and inf in the same places and the rest
    within TOLERANCE (relative L2) of each other."""
    torch = gpu.torch()
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    finite_a, finite_b = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(finite_a, finite_b):
        return False
    if not torch.equal(torch.nan_to_num(a[~finite_a], nan=0.0), torch.nan_to_num(b[~finite_b], nan=0.0)):
        return False
    x, y = a[finite_a].double(), b[finite_b].double()
    diff, scale = float((x - y).norm()), float(y.norm())
    tolerance = TOLERANCE.get(str(a.dtype).removeprefix("torch."), OTHER_FLOAT_TOLERANCE)
    return diff == 0.0 or diff <= tolerance * scale


def _why(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:500]
