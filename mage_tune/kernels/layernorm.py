"""FP32 layer norm, y = (x - mean) * rstd * scale + bias over rows of x (M×d, row-major), rstd = 1/sqrt(var + eps)
with var the biased variance. d is compiled in; M is a runtime argument. One kernel:
`layernorm(x, scale, bias, y, int M, float eps)`.

A thread covers its row in *chunks*: chunk c of thread t holds floats [c·threads·v + t·v, +v), v = vec/4, so every
access of a warp is contiguous. chunks = ceil(d / (threads·v)); only the last chunk can be ragged and is masked.
Every loop over chunks has a compile-time trip count and is fully unrolled, so the census of x's loads is exact:
passes × chunks (regs 1, welford 2, twopass 3).

Knobs (each domain lists its default first, the seed: one 128-thread block per row, 16-byte accesses, one pass):
  threads  threads per row: 128, 256, 512, 1024, 64, 32 (32: a warp per row, no block barrier at all), and 3 · 2^k
           (96 … 768) or 5 · 2^k (160 … 640), which tile rows such as 6144 or 2560 floats in other chunk counts than
           a power of two does; their butterflies span the power of two above the warps (the missing partials add
           -0, or merge as empty), their trees first fold the slots past the power of two below
  rows     rows per block: 1, 2, 4, 8 (block = threads·rows ≤ 1024); grid = ceil(M / rows)
  vec      bytes per global access of x, scale, bias and y: 16 (float4), 8 (float2), 4 (float)
  passes   regs: x read once and held in registers (chunks ≤ 16); welford: one read for (count, mean, M2) merged
           by Chan's formula, a second for the output; twopass: reads for the mean, the variance, the output
  reduce   shfl: warp shuffles, then one shared exchange of per-warp partials behind one barrier per reduction
           (none when threads = 32), every thread adding all the partials (vector broadcast reads); shfl2: the same
           exchange, but lane l reads partial l % warps (one 32-bit read, conflict-free) and a butterfly of shuffles
           over the warps' count adds them; smem: a shared-memory tree, a block barrier per level that crosses warps
  rsqrt    approx: rsqrt.approx (one MUFU.RSQ); precise: sqrt.approx then div.full, Triton's form (MUFU.SQRT and
           MUFU.RCP, no MUFU.RSQ: IEEE sqrtf and __fsqrt_rn both seed with MUFU.RSQ on sm_90)
  hint     cache hint on x's loads: none (ld.global), nc (read-only path, ld.global.nc), cs (streaming, ld.global.cs),
           nc_na (read-only path allocating no L1 line, ld.global.nc.L1::no_allocate: x read once leaves L1 to
           scale and bias); scale and bias always take the read-only path
  y_hint   cache hint on y's stores: none (st.global), cs (streaming, st.global.cs, evict-first lines). On an H200
           cs with hint=cs reached the copy's time where x and y fit in L2 and cost up to 18 % where they do not
           (records/h200-2026-12-01-inner-loop.tar.xz), so it is the search's to choose per shape
  persist  0: one block per row group (a group is `rows` consecutive rows). p > 0: a persistent grid of
           min(groups, p × SMs) blocks, each walking groups blockIdx.x, + gridDim.x, ...; two register sets take
           turns (passes=regs only, chunks ≤ 8 so both fit): the next group's loads are in flight in one while the
           current group, in the other, reduces, and a set is refilled as soon as its group is stored
  full_occupancy  1: __launch_bounds__(block, 2048/block), so ptxas keeps to 32 registers and as many blocks as
           2048 threads hold fit an SM (64 warps where block divides 2048)
  affine   late: scale and bias loaded per chunk as y is written, after the reductions; early (passes=regs, persist=0):
           loaded into registers right after x's loads are issued, so the stores wait on no load. On an H200 the
           late loads cost DRAM-bound rows 1-2 % of a copy's time (scripts/row_copy_probe.py in
           records/h200-2026-12-01-affine-loads.tar.xz), and early's registers cost occupancy; smem (persist=0,
           any passes): each thread copies its chunks' scale and bias into shared memory by cp.async as the block
           starts, so they wait there, not in registers, and the stores read them back (a thread reads only what
           it copied: a wait on its own copies, no barrier).
           2·rows·chunks·threads·vec bytes of dynamic shared memory, within what a block may have on the arch.
           On an H200 smem was 1-10 % slower than late or early at five of six DRAM-bound shapes, level at one
  x_prefetch  0, 128, 256: the prefetch-size qualifier on x's loads (.L2::128B, .L2::256B): on a miss the L2 may
           fetch that many bytes around the sector asked for, fewer and larger DRAM requests for rows read whole
  l2_ahead  0, 1, 2, 4 (sm_90, persist=0, d a multiple of 4, x 16-byte aligned as every allocation is): each row's
           first thread asks the L2 for the row that many MiB of x further on (at least one row; at most l2_ahead MiB
           of it) by one bulk prefetch, cp.async.bulk.prefetch.L2, which the TMA unit serves with no register or
           scoreboard held: a block launched later finds its row in L2, and DRAM has requests in flight beyond what
           the resident blocks' registers hold. On an H200 4 MiB took 8192 × 6144 from 2.3-3.3 % over the copy to
           0.6-1.4 %; 8 and 16 MiB were slower than none for every config at three DRAM-bound shapes (+0.5 to +37 %),
           likely as the rows fetched early are evicted before their blocks read them (not measured:
           records/h200-2026-12-02-l2-ahead.tar.xz took no DRAM counters)

regs and twopass reduce twice (the sum, then the squared deviations around the mean: never E[x²] - mean², which
cancels); welford reduces once, a triple. Rows past M in the last block leave at once when no block barrier is shared
with another row (rows=1 or threads=32); otherwise they redo the last row, to meet the barriers, and store nothing.
A persistent block's trip count depends on blockIdx.x, gridDim.x and M only, so all its threads meet every barrier;
its surplus rows (in the last group) redo the last row and store nothing, whatever rows and threads are.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from mage_tune import gpu
from mage_tune.arch import Arch
from mage_tune.errors import InputError
from mage_tune.kernels.base import Baseline, CompareFact, Config, CudaFamily, Knob, Launch, Shape, config_label
from mage_tune.triton_ref import compile_jit, next_power_of_2

FLOAT = 4  # bytes
EPS = 1e-5
X_MEAN = 30.0  # of make_inputs' x, whose spread is 1
MAX_BLOCK = 1024
MAX_REG_CHUNKS = 16  # regs mode: at most 16 accesses (64 floats at vec=16) of x live per thread
MAX_PERSIST_CHUNKS = MAX_REG_CHUNKS // 2  # persist: the current row group and the prefetched one, both in registers
MAX_STATIC_SHARED = 48 * 1024
HINTS = {"none": "", "nc": ".nc", "cs": ".cs", "nc_na": ".nc.L1::no_allocate"}
PREFETCH = {0: "", 128: ".L2::128B", 256: ".L2::256B"}  # x_prefetch -> the load's prefetch-size qualifier
# persist is a launch-shape knob, not a correctness one: a persistent block walks row groups by gridDim.x, so any
# grid of one block or more computes the same y; on a part with another SM count than the arch's usual one (arch.py)
# the grid is merely a little off persist × its SMs.
PASSES_NOTE = (
    "passes over x: floats of x loaded per thread (static PTX count, each load at its full width) ÷ floats one read "
    "of the row puts on a thread (d for ours, Triton's BLOCK for Triton's, over the threads of one row, rounded up "
    "to whole accesses)."
)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def part_stride(warps: int) -> int:
    """Floats per row of the shfl exchange: the warps' count, rounded up to a multiple of 4 beyond 2 warps, so every
    row of partials starts 16-byte aligned for the float4 reads."""
    return warps if warps <= 2 else -(-warps // 4) * 4


class LayerNorm(CudaFamily):
    name = "layernorm"
    template = "layernorm.cu.j2"
    knobs = (
        Knob("threads", (128, 256, 512, 1024, 64, 32, 96, 192, 384, 768, 160, 320, 640), "threads per row"),
        Knob("rows", (1, 2, 4, 8), "rows per block (threads·rows ≤ 1024); with threads=32, a warp per row"),
        Knob("vec", (16, 8, 4), "bytes per global access: float4, float2 or float"),
        Knob("passes", ("regs", "welford", "twopass"), "reads of x: 1 (row in registers), 2 (Welford), 3"),
        Knob(
            "reduce",
            ("shfl", "smem", "shfl2"),
            "warp shuffles + one shared exchange (every thread adds all partials; shfl2: one partial per lane, then "
            "shuffles), or a shared-memory tree",
        ),
        Knob("rsqrt", ("approx", "precise"), "rsqrt.approx (MUFU.RSQ), or sqrt.approx + div.full (no MUFU.RSQ)"),
        Knob(
            "hint",
            ("none", "nc", "cs", "nc_na"),
            "cache hint on x's loads: plain, read-only path, streaming, read-only path without an L1 line",
        ),
        Knob(
            "y_hint",
            ("none", "cs"),
            "cache hint on y's stores: plain, or streaming (st.global.cs, evict first)",
            free=True,
        ),
        Knob("persist", (0, 2, 4, 8), "0: a block per row group; p: p × SMs blocks, next group's x loaded early"),
        Knob(
            "full_occupancy",
            (0, 1),
            "1: __launch_bounds__(block, 2048/block): registers capped (32) so 64 warps fit on an SM",
        ),
        Knob(
            "affine",
            ("late", "early", "smem"),
            "scale and bias loaded as y is written (late), into registers while x's loads are in flight (early), "
            "or copied into shared memory by cp.async as the block starts (smem)",
        ),
        Knob(
            "x_prefetch",
            (0, 128, 256),
            "bytes the L2 may fetch around each miss of x's loads (ld ….L2::128B / L2::256B); 0: no hint",
            free=True,
        ),
        Knob(
            "l2_ahead",
            (0, 1, 2, 4),
            "MiB of x ahead: each row's block prefetches the row that far on into L2 (cp.async.bulk.prefetch.L2, "
            "sm_90); 0: none",
        ),
    )
    dims = ("m", "d")
    default_dims: ClassVar[dict[str, int]] = {"m": 4096}
    dim_help: ClassVar[dict[str, str]] = {"m": "rows", "d": "row width (normalized over)"}
    kernel_name = "layernorm"
    param_names = ("x", "scale", "bias", "y")
    input_dims: ClassVar[dict[str, tuple[str, ...]]] = {"x": ("m", "d"), "scale": ("d",), "bias": ("d",)}
    baselines = ("triton", "torch", "copy")
    copy_of = "x"

    # --- derived sizes -------------------------------------------------------------------------------------------
    @staticmethod
    def chunks(config: Config, shape: Shape) -> int:
        """Accesses of x per thread per pass."""
        return _cdiv(shape["d"], config["threads"] * config["vec"] // FLOAT)

    @staticmethod
    def ahead_rows(config: Config, shape: Shape) -> int:
        """Rows between a row and the one its block prefetches into L2: l2_ahead MiB of x, at least one row (of which
        at most l2_ahead MiB is prefetched)."""
        return max(1, (config["l2_ahead"] << 20) // (shape["d"] * FLOAT))

    @classmethod
    def affine_bytes(cls, config: Config, shape: Shape) -> int:
        """Dynamic shared memory of a block: with affine=smem the copies of scale and bias, laid out like the chunks of
        each row of the block; none otherwise."""
        if config["affine"] != "smem":
            return 0
        return 2 * config["rows"] * cls.chunks(config, shape) * config["threads"] * config["vec"]

    @staticmethod
    def shared_bytes(config: Config) -> int:
        """Static shared memory of the reductions (the template declares exactly this)."""
        threads, rows = config["threads"], config["rows"]
        welford = config["passes"] == "welford"
        if config["reduce"] != "smem":
            if threads == 32:
                return 0  # the warp is the row: shuffles only
            # welford: one float4 triple per warp; otherwise one float per warp for each of two reductions
            warps = threads // 32
            return rows * (warps * 4 if welford else 2 * part_stride(warps)) * FLOAT
        return rows * threads * (3 if welford else 2) * FLOAT

    # --- the space -----------------------------------------------------------------------------------------------
    def violations(self, config: Config, shape: Shape, arch: Arch) -> list[str]:
        problems = []
        threads, rows, vec, d = config["threads"], config["rows"], config["vec"], shape["d"]
        if threads * rows > MAX_BLOCK:
            problems.append(
                f"threads={threads} × rows={rows} is {threads * rows} threads per block, over {MAX_BLOCK}; "
                "lower threads or rows"
            )
        if (d * FLOAT) % vec:
            problems.append(
                f"vec={vec} needs every row to start {vec}-byte aligned, but a row of d={d} floats is "
                f"{d * FLOAT} bytes; use a narrower vec"
            )
        elif config["passes"] == "regs" and self.chunks(config, shape) > MAX_REG_CHUNKS:
            problems.append(
                f"passes=regs holds the row in registers, but d={d} with threads={threads} and vec={vec} is "
                f"{self.chunks(config, shape)} chunks per thread, over {MAX_REG_CHUNKS}; use more threads, a wider "
                "vec, or passes=welford or twopass"
            )
        if config["persist"]:
            if config["passes"] != "regs":
                problems.append(
                    f"persist={config['persist']} prefetches the next row group into registers while the current one "
                    f"reduces, which needs passes=regs, not passes={config['passes']}; use passes=regs or persist=0"
                )
            elif (d * FLOAT) % vec == 0 and self.chunks(config, shape) > MAX_PERSIST_CHUNKS:
                problems.append(
                    f"persist={config['persist']} holds two row groups in registers (the current one and the "
                    f"prefetched next), but d={d} with threads={threads} and vec={vec} is "
                    f"{self.chunks(config, shape)} chunks per thread, over {MAX_PERSIST_CHUNKS}; use more threads, "
                    "a wider vec, or persist=0"
                )
        if config["affine"] == "early" and (config["passes"] != "regs" or config["persist"]):
            problems.append(
                "affine=early holds a row's scale and bias in registers beside x, for a block that normalizes one "
                f"row group: it needs passes=regs and persist=0, not passes={config['passes']}, "
                f"persist={config['persist']}"
            )
        if config["affine"] == "smem" and config["persist"]:
            problems.append(
                "affine=smem copies scale and bias into shared memory once, for a block that normalizes one row "
                f"group: it needs persist=0, not persist={config['persist']}"
            )
        if config["l2_ahead"]:
            problems += self._ahead_violations(config, shape, arch)
        if config["reduce"] == "shfl2" and threads == 32:
            problems.append("reduce=shfl2 differs from shfl only across warps; with threads=32 use reduce=shfl")
        if self.shared_bytes(config) > MAX_STATIC_SHARED:
            problems.append(
                f"reduce={config['reduce']} with threads={threads}, rows={rows} needs {self.shared_bytes(config)} "
                f"bytes of shared memory, over {MAX_STATIC_SHARED}"
            )
        elif (d * FLOAT) % vec == 0 and config["affine"] == "smem":
            optin = arch.smem_per_block_optin
            total = self.shared_bytes(config) + self.affine_bytes(config, shape)
            if total > optin:
                problems.append(
                    f"affine=smem at d={d} with rows={rows} needs {total} bytes of shared memory per block (scale "
                    f"and bias for each row, and the reductions'), over the {optin} a block may have on {arch}; use "
                    "fewer rows, or affine=late or early"
                )
        return problems

    @staticmethod
    def _ahead_violations(config: Config, shape: Shape, arch: Arch) -> list[str]:
        ahead, problems = config["l2_ahead"], []
        if arch.compute_major < 9:
            problems.append(f"l2_ahead={ahead} prefetches by cp.async.bulk.prefetch.L2, which needs sm_90, not {arch}")
        if config["persist"]:
            problems.append(
                f"l2_ahead={ahead} prefetches the row a later block reads, for a grid of a block per row group: it "
                f"needs persist=0, not persist={config['persist']} (a persistent block loads its next group early)"
            )
        if shape["d"] % 4:
            problems.append(
                f"l2_ahead={ahead} prefetches whole rows in 16-byte units from 16-byte aligned starts, but a row of "
                f"d={shape['d']} floats is {shape['d'] * FLOAT} bytes; use l2_ahead=0"
            )
        return problems

    def bound_combinations(self, shape: Shape, arch: Arch) -> Iterator[tuple]:
        """The base's valid tuples, in its order, for a quarter of the checks: l2_ahead is the last constrained knob
        and no other constraint reads it, while its own read only persist, the arch and d; so a tuple is valid with
        l2_ahead > 0 exactly when it is with 0 and those allow the prefetch."""
        if type(self).violations is not LayerNorm.violations:  # a subclass with a space of its own
            yield from super().bound_combinations(shape, arch)
            return
        bound = [k for k in self.knobs if not k.free]
        others, ahead = bound[:-1], bound[-1]
        assert ahead.name == "l2_ahead" and ahead.domain[0] == 0, "l2_ahead (0 first) must stay the last bound knob"
        firsts = {k.name: k.domain[0] for k in self.knobs if k.free}
        for values in itertools.product(*(k.domain for k in others)):
            config = {**dict(zip((k.name for k in others), values, strict=True)), **firsts, "l2_ahead": 0}
            if self.violations(config, shape, arch):
                continue
            yield (*values, 0)
            if ahead.domain[1:] and not self._ahead_violations({**config, "l2_ahead": ahead.domain[1]}, shape, arch):
                yield from ((*values, mib) for mib in ahead.domain[1:])

    def constraint_text(self) -> list[str]:
        return [
            f"threads × rows ≤ {MAX_BLOCK} (one block holds rows × threads threads).",
            "4·d must be a multiple of vec, so every row starts aligned to the access width.",
            f"passes=regs needs ceil(d / (threads·vec/4)) ≤ {MAX_REG_CHUNKS} chunks per thread (the row in registers).",
            f"persist > 0 needs passes=regs and ≤ {MAX_PERSIST_CHUNKS} chunks per thread (two row groups in "
            "registers).",
            "reduce=shfl2 needs threads ≥ 64 (a warp-wide row has no exchange, so it would be shfl's kernel).",
            "affine=early needs passes=regs and persist=0 (scale and bias held beside one row group's x).",
            "affine=smem needs persist=0, and its 2·rows·chunks·threads·vec bytes of scale and bias, with the "
            "reductions', within the shared memory a block may have on the arch (227 KB on sm_90).",
            "l2_ahead > 0 needs sm_90 (bulk prefetch), persist=0 and d a multiple of 4 (rows of whole 16-byte units; "
            "x itself 16-byte aligned, as every allocation is).",
            f"The reduction's shared memory must fit in {MAX_STATIC_SHARED // 1024} KB "
            "(smem: rows·threads slots per reduction; shfl: one per warp).",
        ]

    def launch(self, config: Config, shape: Shape, arch: Arch) -> Launch:
        groups = _cdiv(shape["m"], config["rows"])
        grid = min(groups, config["persist"] * arch.sms) if config["persist"] else groups
        return Launch((grid, 1, 1), config["threads"] * config["rows"], self.affine_bytes(config, shape))

    def walk_steps(self, config: Config, shape: Shape, blocks: int) -> int:
        """The row groups of the busiest persistent block (it walks them one after another); 0 for a block per
        group."""
        return _cdiv(_cdiv(shape["m"], config["rows"]), blocks) if config["persist"] else 0

    def walk_twin(self, config: Config) -> Config | None:
        """A persistent config's twin: the same kernel with a block per row group, scale and bias read alike."""
        return {**config, "persist": 0} if config["persist"] else None

    def template_vars(self, config: Config, shape: Shape) -> dict:
        threads, rows, d = config["threads"], config["rows"], shape["d"]
        v = config["vec"] // FLOAT
        return {
            **config,
            "label": config_label(self.name, config),
            "d": d,
            "block": threads * rows,
            "vec_floats": v,
            "warps": threads // 32,
            "warps_pow2": next_power_of_2(threads // 32),
            "part_stride": part_stride(threads // 32),
            "tree_base": 1 << (threads.bit_length() - 1),  # the largest power of two ≤ threads
            "chunks": self.chunks(config, shape),
            "full_chunks": d // (threads * v),
            "ptx_hint": HINTS[config["hint"]] + PREFETCH[config["x_prefetch"]],
            "ahead_rows": self.ahead_rows(config, shape),
            "ahead_bytes": min(d * FLOAT, config["l2_ahead"] << 20),  # a multiple of 16 bytes, within a u32
            "store": "__stcs" if config["y_hint"] == "cs" else "plain_store",
            # Without a block barrier shared across rows, a block's surplus rows may simply leave.
            "early_exit": rows == 1 or threads == 32,
            "gather": False,  # embedding-layernorm's: rows read through an index
            "residual": False,  # add-layernorm's: the norm of x + res
            "res_vector": False,  # add-vector-layernorm's: res one row, added to each row of x
            "res_row": False,  # add-row-layernorm's: one more input, a row added to each row of res
            "write_sum": False,  # add-layernorm-sum's: x + res written out too
        }

    # --- correctness and cost -----------------------------------------------------------------------------------
    def make_inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        m, d = shape["m"], shape["d"]
        return {
            # A mean far from the spread (30 against 1): a variance taken as E[x²] - mean² in FP32 then misses the
            # tolerance (about 3e-5 relative error), while the centered forms stay near 1e-6. A mean of 3 would not.
            "x": (X_MEAN + rng.standard_normal((m, d))).astype(np.float32),
            "scale": (1.0 + 0.5 * rng.standard_normal(d)).astype(np.float32),
            "bias": rng.standard_normal(d).astype(np.float32),
        }

    def reference(self, inputs: dict[str, np.ndarray], shape: Shape) -> np.ndarray:
        x = inputs["x"].astype(np.float64)
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        y = (x - mean) / np.sqrt(var + EPS)
        return y * inputs["scale"].astype(np.float64) + inputs["bias"].astype(np.float64)

    def output_shape(self, shape: Shape) -> tuple[int, ...]:
        return (shape["m"], shape["d"])

    def scalar_args(self, shape: Shape) -> tuple:
        return (np.int32(shape["m"]), np.float32(EPS))

    def bytes_moved(self, shape: Shape) -> int:
        m, d = shape["m"], shape["d"]
        return FLOAT * (2 * m * d + 2 * d)

    # --- baselines and comparison ---------------------------------------------------------------------------------
    def baseline_kernels(self, shape: Shape) -> list[Baseline]:
        """Triton's one-row-per-program layer norm at each num_warps that fits its block, and torch's."""
        block = next_power_of_2(shape["d"])
        warps = [w for w in (1, 2, 4, 8, 16) if 32 * w <= max(32, block)]
        triton = [Baseline(f"triton[num_warps={w}]", "triton", {"num_warps": w, "BLOCK": block}) for w in warps]
        return [*triton, Baseline("torch.layer_norm", "torch")]

    def launcher(self, job, shape: Shape):
        m, d = shape["m"], shape["d"]
        if job.kind == "torch":
            F = gpu.torch().nn.functional
            # torch has no out= layer norm; return the fresh tensor instead of paying for a copy into __out__.
            return lambda bufs: F.layer_norm(bufs["x"], (d,), bufs["scale"], bufs["bias"], EPS)
        if job.kind == "triton":
            norm_kernel = gpu.triton_kernels().norm_kernel
            block, warps = job.config["BLOCK"], job.config["num_warps"]

            def launch(bufs):
                norm_kernel[(m,)](
                    bufs["x"], bufs["__out__"], bufs["scale"], bufs["bias"], d, d, EPS, BLOCK=block, num_warps=warps
                )

            return launch
        return None

    def reference_kernels(self, shape: Shape, arch: Arch, specialize: bool = True, **options) -> list:
        """Triton's norm_kernel: BLOCK the next power of two ≥ d (or options["config"]["BLOCK"]), num_warps as
        given, else the tutorial's block/256 rule; grid (m,)."""
        tk = gpu.triton_kernels()
        config = dict(options.get("config") or {})
        block = int(config.get("BLOCK") or next_power_of_2(shape["d"]))
        if block < shape["d"]:
            raise InputError(f"Triton norm_kernel needs BLOCK >= d; BLOCK={block}, d={shape['d']}")
        warps = int(config.get("num_warps") or options.get("num_warps") or min(max(block // 256, 1), 8))
        values = {"x": None, "y": None, "scale": None, "bias": None, "stride": shape["d"], "N": shape["d"]}
        kernel = compile_jit(
            tk.norm_kernel, dict(tk.NORM_SIGNATURE), {"BLOCK": block}, arch, warps, None, "triton", values, specialize
        )
        return [dataclasses.replace(kernel, grid=(shape["m"], 1, 1))]

    def compare_facts(self, census, config: dict, shape: Shape, reference: bool) -> list[CompareFact]:
        if reference:
            passes = passes_over_row(census, "x", int(config["BLOCK"]), 32 * int(config["num_warps"]))
        else:
            passes = passes_over_row(census, "x", shape["d"], int(config["threads"]))
        return [CompareFact("passes", "passes over x", passes, passes_text(passes))]

    compare_note = PASSES_NOTE


def passes_over_row(census, param: str, row_floats: int, threads_per_row: int) -> dict | None:
    """How many times one thread's loads of `param` cover its share of the row.

    loaded = Σ over the PTX loads attributed to `param` of (width / 32) floats; share = the floats one read of the
    row puts on a thread: ceil(row_floats / (threads_per_row · w)) · w, w the widest load in floats. The count is
    static (instructions in the code), exact where the row loop is unrolled: our templates unroll it (d is a
    compile-time constant) and Triton's norm_kernel has no loop. None when the census attributes no loads to it.
    """
    params = census.ptx.params if census.ptx else None
    acc = (params or {}).get(param)
    if not acc or not acc.loads or not acc.load_bits:
        return None
    loaded = sum(count * bits // 32 for bits, count in acc.load_bits.items())
    widest = max(1, max(acc.load_bits) // 32)
    share = -(-row_floats // (threads_per_row * widest)) * widest
    return {"value": loaded / share, "loaded_floats": loaded, "share_floats": share, "loads": acc.loads}


def passes_text(passes) -> str:
    if passes is None:
        return "-"
    value = passes["value"]
    shown = f"{value:g}" if value == int(value) else f"{value:.2f}"
    return f"{shown} ({passes['loaded_floats']} of {passes['share_floats']} floats a thread)"


FAMILY = LayerNorm()
