"""FP32 layer norm with x brought in by Hopper's bulk copies: the problem, inputs, reference and baselines are
`layernorm`'s; the kernel is another shape of work, so a family of its own, opted into by name.

A warp per row, and every warp its own pipeline: lane 0 issues `cp.async.bulk` copies of whole row groups (`rows`
consecutive rows) into the warp's ring of `stages` shared-memory stages, each with an mbarrier that completes when the
copy engine has counted all its bytes in. The warp reads its row from shared memory three times (the mean, squared
deviations around it: never E[x²] - mean², then y) and stores y straight from registers; once every lane is done
with a stage, lane 0 refills it with the group `stages` on. No block barrier anywhere, and bytes in flight cost no
registers: (stages - 1) × rows × 4·d bytes per warp while it reduces, where the `layernorm` family's loads hold every
byte in flight in a register. Blocks are persistent: min(ceil(groups / warps), blocks × SMs) of them, the grid's
warps taking groups round-robin.

Knobs (defaults first):
  warps    warps per block (independent pipelines): 4, 8, 2, 16, 1
  rows     rows per stage (one copy): 1, 2, 4
  stages   shared-memory stages per warp: 3, 2, 4, 6, 8
  blocks   persistent blocks per SM: 2, 1, 4, 8
  x_hint   x's bulk copies: none, or evict_first (an L2 policy: x is read once)
  rsqrt    approx (one MUFU.RSQ) or precise (sqrt.approx then div.full, Triton's form)
  y_hint   y's stores: none (st.global) or cs (streaming, evict-first lines)

cp.async.bulk and mbarrier expect_tx need sm_90; a bulk copy moves whole 16-byte units from 16-byte aligned
addresses, so 4·d must be a multiple of 16.

Measured on an H200 (records/h200-2026-12-01-bulk-copy.tar.xz): correct everywhere, and slower than the built-in
`layernorm` at every DRAM-bound shape tried (1.085-1.37× the same-bytes copy, against its 1.02-1.03×). Bulk copies in
and 16-byte stores out move a tensor at best 1.04× a plain copy's time there (the probe, scripts/bulk_copy_probe.py
in that archive). An example of a Hopper-only family with dynamic shared memory, kept for that and as the record of
a lever measured.
"""

from __future__ import annotations

from mage_tune.arch import get_arch
from mage_tune.kernels.base import Config, Knob, Launch, Shape, config_label
from mage_tune.kernels.layernorm import FLOAT, LayerNorm

VEC_FLOATS = 4  # 16-byte shared reads and global stores
WARP = 32
BULK_UNIT = 16  # bytes: a bulk copy's size and addresses are multiples of this
BARRIER_BYTES = 8  # one mbarrier per stage
MIN_CAPABILITY = (9, 0)


class LayerNormBulk(LayerNorm):
    name = "layernorm-bulk"
    template = "layernorm_bulk.cu.j2"
    knobs = (
        Knob("warps", (4, 8, 2, 16, 1), "warps per block, each its own pipeline (a warp per row)"),
        Knob("rows", (1, 2, 4), "rows per stage: one bulk copy of that many consecutive rows"),
        Knob("stages", (3, 2, 4, 6, 8), "shared-memory stages per warp: copies in flight while it reduces one"),
        Knob("blocks", (2, 1, 4, 8), "persistent blocks per SM"),
        Knob("x_hint", ("none", "evict_first"), "L2 policy of x's bulk copies: none, or evict first (read once)"),
        Knob("rsqrt", ("approx", "precise"), "rsqrt.approx (MUFU.RSQ), or sqrt.approx + div.full (no MUFU.RSQ)"),
        Knob(
            "y_hint",
            ("none", "cs"),
            "cache hint on y's stores: plain, or streaming (st.global.cs, evict first)",
            free=True,
        ),
    )

    # --- derived sizes -------------------------------------------------------------------------------------------
    @staticmethod
    def chunks(config: Config, shape: Shape) -> int:
        """16-byte accesses per lane per pass over a row."""
        return -(-shape["d"] // (WARP * VEC_FLOATS))

    @staticmethod
    def ring_bytes(config: Config, shape: Shape) -> int:
        """Dynamic shared memory of a block: every warp's ring of stages, each `rows` rows of x."""
        return config["warps"] * config["stages"] * config["rows"] * shape["d"] * FLOAT

    @staticmethod
    def shared_bytes(config: Config) -> int:
        """Static shared memory of a block: one mbarrier per stage of each warp."""
        return config["warps"] * config["stages"] * BARRIER_BYTES

    # --- the space -----------------------------------------------------------------------------------------------
    def violations(self, config: Config, shape: Shape, arch: str) -> list[str]:
        problems = []
        d, blocks = shape["d"], config["blocks"]
        target = get_arch(arch)
        if target.capability < MIN_CAPABILITY:
            return [f"cp.async.bulk and mbarrier transaction counts need sm_90 or later, not {target.name}"]
        if (d * FLOAT) % BULK_UNIT:
            problems.append(
                f"a bulk copy moves whole {BULK_UNIT}-byte units from aligned rows, but a row of d={d} floats is "
                f"{d * FLOAT} bytes; use the layernorm family"
            )
        per_block = self.ring_bytes(config, shape) + self.shared_bytes(config)
        if per_block > target.smem_per_block_optin:
            problems.append(
                f"warps={config['warps']} × stages={config['stages']} × rows={config['rows']} × {d * FLOAT} bytes is "
                f"{per_block} bytes of shared memory per block, over {target.smem_per_block_optin} on {target.name}; "
                "fewer warps, stages or rows"
            )
        elif blocks * (per_block + target.reserved_smem_per_block) > target.smem_per_sm:
            problems.append(
                f"blocks={blocks} × {per_block + target.reserved_smem_per_block} bytes of shared memory (reservation "
                f"included) is over the {target.smem_per_sm} of an SM on {target.name}; fewer blocks, warps or stages"
            )
        if blocks * config["warps"] > target.max_warps_per_sm:
            problems.append(
                f"blocks={blocks} × warps={config['warps']} is over the {target.max_warps_per_sm} warps of an SM"
            )
        return problems

    def constraint_text(self) -> list[str]:
        return [
            "sm_90 or later (cp.async.bulk, mbarrier expect_tx).",
            "4·d must be a multiple of 16: a bulk copy moves 16-byte units between aligned addresses.",
            "warps · stages · rows · 4·d + mbarriers ≤ a block's opt-in shared memory (227 KB on sm_90), and blocks "
            "of that, with the 1 KB reservation each, ≤ the SM's (228 KB).",
            "blocks × warps ≤ the SM's warps (64 on sm_90).",
        ]

    def launch(self, config: Config, shape: Shape, arch: str) -> Launch:
        groups = -(-shape["m"] // config["rows"])
        sms = get_arch(arch).sms
        grid = min(-(-groups // config["warps"]), config["blocks"] * sms)
        return Launch((grid, 1, 1), WARP * config["warps"], self.ring_bytes(config, shape))

    def template_vars(self, config: Config, shape: Shape) -> dict:
        d = shape["d"]
        return {
            **config,
            "label": config_label(self.name, config),
            "d": d,
            "chunks": self.chunks(config, shape),
            "full_chunks": d // (WARP * VEC_FLOATS),
            "store": "__stcs" if config["y_hint"] == "cs" else "plain_store",
        }

    def compare_facts(self, census, config: dict, shape: Shape, reference: bool) -> list:
        if reference:
            return super().compare_facts(census, config, shape, reference)
        return []  # x arrives by bulk copies, not loads: the census's bulk-copy rows say how


FAMILY = LayerNormBulk()
