"""FP32 layer norm with a row split over a Hopper thread block cluster: the problem, inputs, reference and baselines
are `layernorm`'s; the kernel is another shape of work, so a family of its own, opted into by path.

Why: on an H200 every one-block-per-row layer norm tried, ours and Triton's, stays 2-3 % over a same-bytes copy at
d = 6144 whatever the row count (records/h200-2026-12-01-wide-rows.tar.xz), while ours at rows of 512-2560 floats comes
within 0.5-1 % of it. A cluster of C CTAs gives each CTA a slice of d / C floats in registers, so a wide row is moved as
narrower ones are; the price is a cluster barrier per reduction (the CTAs' partial sums meet through distributed shared
memory: mapa + ld.shared::cluster) and one more before a CTA leaves, split in an arrive after its last shared read and a
wait after its stores.

Knobs (defaults first):
  cluster  CTAs per row: 2, 4, 1, 8 (1: one CTA per row, the same code; 8: the portable cluster limit)
  threads  threads per CTA: 128, 256, 64, 512
  affine   scale and bias loaded as y is written (late), or into registers beside x's loads (early)
  hint     x's loads: nc (read-only path), none, cs (streaming)
  rsqrt    approx (one MUFU.RSQ) or precise (sqrt.approx then div.full, Triton's form)
  y_hint   y's stores: none (st.global) or cs (streaming, evict-first lines)

Clusters need sm_90; each CTA's slice is a whole number of float4 (d a multiple of 4 · cluster), at most 16 of them
per thread (x stays in registers), and no thread without one. Measured on an H200
(records/h200-2026-12-01-cluster-split.tar.xz, its scripts/cluster_layernorm.sh): every split is slower than
cluster=1, the control (the best of 2, 4 and 8 CTAs 14, 43 and 131 % over the best control at 8192 × 6144): the cluster
barriers cost more than the narrower slices give back.
"""

from __future__ import annotations

from mage_tune.arch import get_arch
from mage_tune.kernels.base import CompareFact, Config, Knob, Launch, Shape, config_label
from mage_tune.kernels.layernorm import HINTS, MAX_REG_CHUNKS, LayerNorm, passes_over_row, passes_text

VEC_FLOATS = 4  # float4 accesses
MAX_GRID_X = 2**31 - 1
MIN_CAPABILITY = (9, 0)
BUILTIN_KNOBS = {k.name: k for k in LayerNorm.knobs}  # rsqrt and y_hint as the built-in's


class LayerNormCluster(LayerNorm):
    name = "layernorm-cluster"
    template = "layernorm_cluster.cu.j2"
    knobs = (
        Knob("cluster", (2, 4, 1, 8), "CTAs per row (a thread block cluster), meeting in distributed shared memory"),
        Knob("threads", (128, 256, 64, 512), "threads per CTA"),
        Knob("affine", ("late", "early"), "scale and bias loaded as y is written, or into registers beside x's loads"),
        Knob("hint", ("nc", "none", "cs"), "cache hint on x's loads: read-only path, plain, streaming"),
        BUILTIN_KNOBS["rsqrt"],
        BUILTIN_KNOBS["y_hint"],
    )

    @staticmethod
    def slice_floats(config: Config, shape: Shape) -> int:
        return shape["d"] // config["cluster"]

    @classmethod
    def chunks(cls, config: Config, shape: Shape) -> int:
        """float4 accesses per thread over its CTA's slice."""
        return -(-cls.slice_floats(config, shape) // (config["threads"] * VEC_FLOATS))

    def violations(self, config: Config, shape: Shape, arch: str) -> list[str]:
        target = get_arch(arch)
        if target.capability < MIN_CAPABILITY:
            return [f"thread block clusters need sm_90 or later, not {target.name}"]
        d, cluster, threads = shape["d"], config["cluster"], config["threads"]
        if d % (VEC_FLOATS * cluster):
            return [
                f"d={d} does not split into {cluster} slices of whole float4: "
                f"d must be a multiple of {VEC_FLOATS * cluster}"
            ]
        problems = []
        slice_floats, chunks = d // cluster, self.chunks(config, shape)
        if chunks > MAX_REG_CHUNKS:
            problems.append(
                f"a slice of {slice_floats} floats is {chunks} float4 per thread at "
                f"threads={threads}, over the {MAX_REG_CHUNKS} held in registers; more threads or a larger cluster"
            )
        if threads * VEC_FLOATS > slice_floats:
            problems.append(
                f"threads={threads} × 4 floats is more than a slice of {slice_floats}: some threads would hold nothing"
            )
        if shape["m"] * cluster > MAX_GRID_X:
            problems.append(f"m={shape['m']} rows × {cluster} CTAs is over the grid's {MAX_GRID_X} blocks")
        return problems

    def constraint_text(self) -> list[str]:
        return [
            "sm_90 or later (thread block clusters, distributed shared memory).",
            "d a multiple of 4 · cluster: each CTA's slice is whole float4.",
            f"ceil(d / cluster / (4 · threads)) ≤ {MAX_REG_CHUNKS}: the slice stays in registers.",
            "4 · threads ≤ d / cluster: every thread holds part of the slice.",
            f"m · cluster ≤ {MAX_GRID_X}: a CTA per slice fits the grid.",
        ]

    def launch(self, config: Config, shape: Shape, arch: str) -> Launch:
        return Launch((shape["m"] * config["cluster"], 1, 1), config["threads"], 0)

    def walk_steps(self, config: Config, shape: Shape, blocks: int) -> int:
        return 0  # a CTA per slice of a row: no block walks

    def walk_twin(self, config: Config) -> Config | None:
        return None

    def template_vars(self, config: Config, shape: Shape) -> dict:
        slice_floats = self.slice_floats(config, shape)
        return {
            **config,
            "label": config_label(self.name, config),
            "d": shape["d"],
            "slice": slice_floats,
            "chunks": self.chunks(config, shape),
            "full_chunks": slice_floats // (config["threads"] * VEC_FLOATS),
            "ptx_hint": HINTS[config["hint"]],
            "y_ptx": ".cs" if config["y_hint"] == "cs" else "",
        }

    def compare_facts(self, census, config: dict, shape: Shape, reference: bool) -> list[CompareFact]:
        if reference:
            return super().compare_facts(census, config, shape, reference)
        passes = passes_over_row(census, "x", self.slice_floats(config, shape), int(config["threads"]))
        return [CompareFact("passes", "passes over x", passes, passes_text(passes))]


FAMILY = LayerNormCluster()
