"""A search with nothing measured of its family and arch starts from the family's defaults, its author's pick, where
they are valid at the shape (the database's seeds are tests/tuning/test_tuning_db.py's and test_shipped_data.py's)."""

from types import SimpleNamespace

from mage_tune.arch import get_arch
from mage_tune.kernels.matmul_bf16 import FAMILY as BF16
from mage_tune.problem import Problem
from mage_tune.search.report import source_kind
from mage_tune.tuning import warm


def test_with_nothing_measured_the_family_defaults_go_first_where_valid(monkeypatch):
    monkeypatch.setattr(warm.shipped, "entries", lambda *args: [])  # nothing shipped either (the package has some)
    problem = Problem(BF16, {"m": 2304, "n": 1792, "k": 3072}, get_arch("sm_90a"))
    cold = warm.plan(problem, [], "NVIDIA H200", False, 1, 0)
    # the defaults (128 × 256: 126 tiles in one wave), then the family's other pick that fills the wave as well
    assert (cold.seeds[0].config, cold.seeds[0].source) == (BF16.defaults(), "default")
    assert [(s.config["bm"], s.config["bn"]) for s in cold.seeds[1:]] == [(256, 128)]
    assert cold.seeds[1].source == "family pick: wave fill 256x128: 126 tiles in one wave of 132"
    assert "defaults first" in cold.notes[0] and cold.notes[1] == "warm start: 1 of the family's picks for this shape"
    # The family refuses sm_80 (wgmma is sm_90a's): no seed, and the note says only that nothing was measured.
    refused = warm.plan(Problem(BF16, problem.shape, get_arch("sm_80")), [], "NVIDIA A100", False, 1, 0)
    assert refused.seeds == () and "defaults" not in refused.notes[0]


class ByWidth:
    """A stand-in time model: the nearer a config's bn to 208, the faster."""

    def predict(self, rows):
        return [abs(row["knob:bn"] - 208) for row in rows]


def test_many_new_knob_values_are_seeded_by_the_model_s_pick_else_in_knob_order():
    """Records that hold only the 64-multiples and 160/224 leave seven bn values new (and bm's 64 and 256): with a
    model, the six it expects fastest here are seeded; without one, the first six in knob and value order."""
    problem = Problem(BF16, {"m": 2900, "n": 4704, "k": 3104}, get_arch("sm_90a"))
    measured = [SimpleNamespace(config={**BF16.defaults(), "bn": bn}) for bn in (256, 64, 128, 160, 192, 224)]
    near = [warm.Seed(BF16.defaults(), "nearest")]

    def widths(model):
        seeds, note = warm.new_value_seeds(problem, measured, near, model)
        assert len(seeds) == warm.NEW_VALUE_PICKS and "knob values the database has not measured" in note
        return [(s.source.split(" ")[2].split("=")[0], s.config["bn"]) for s in seeds]  # "new value KNOB=V on …"

    # 208, then three new values on the nearest width they fit (192: 16 off): one consumer and ping-pong (192
    # accumulators a thread), staging's 4 beside four stages; then 176 and 240 (32 off, in the knob's order)
    assert widths(ByWidth()) == [
        ("bn", 208),
        ("consumers", 192),
        ("staging", 192),
        ("schedule", 192),
        ("bn", 176),
        ("bn", 240),
    ]
    # bm's three new values (bn kept, or the nearest valid width: 256 rows take bn=128, 192 rows three consumers and
    # bn=128, as 192 x 192 in four stages of two staging chunks overflows shared memory), then bn's
    assert widths(None) == [("bm", 256), ("bm", 128), ("bm", 128), ("bn", 80), ("bn", 96), ("bn", 112)]


def test_the_model_s_picks_are_spread_over_configs_a_few_knobs_apart():
    """The model's ranking of one tile in four rasters and two staggers, then other tiles: the picks take the best
    of each group first (three knobs apart or more), then fill up with the best of the rest in the model's order."""
    base = BF16.defaults()
    same_tile = [{**base, "raster": r, "stagger": s} for s in (0, 1) for r in (8, 0, 4, 16)]
    other = [
        {**base, "bm": 192, "bn": 192, "consumers": 3, "staging": 1},
        {**base, "bn": 224, "split": "columns", "transposed": 1},
        {**base, "bn": 160, "cluster": 2, "multicast": 1},
    ]
    ranked = same_tile + other
    picks = warm.spread_picks(ranked)
    assert len(picks) == warm.MODEL_PICKS and len({str(p) for p in picks}) == warm.MODEL_PICKS
    assert picks[:4] == [same_tile[0], *other]  # each at least PICKS_APART knobs from the ones before
    assert picks[4:] == same_tile[1:3]  # then the model's order again
    for i, p in enumerate(picks[:4]):
        assert all(sum(p[k] != q[k] for k in p) >= warm.PICKS_APART for q in picks[:i])
    assert warm.spread_picks(same_tile[:2]) == same_tile[:2]  # fewer than MODEL_PICKS: all of them


def test_the_family_s_picks_are_the_large_tiles_that_fill_the_shape_s_waves(monkeypatch):
    """At 2048 × 2560 the 128 × 256 default makes 160 tiles (a second wave a fifth full); 256 × 160 makes 128, one
    wave, and 256 × 176 120 (cuBLAS runs a 320 × 128 tile there). At 2048 × 3072 256 × 192 makes 128. Each pick is
    valid at its shape, holds 128 accumulators a consumer thread or more and is seeded once, after the defaults."""
    arch = get_arch("sm_90a")
    for shape, tiles in (
        ({"m": 2048, "n": 2560, "k": 12288}, [(256, 160), (256, 176)]),
        ({"m": 2048, "n": 3072, "k": 8192}, [(256, 192), (128, 256)]),
    ):
        picks = BF16.shape_seeds(shape, arch)
        assert [(c["bm"], c["bn"]) for _, c in picks] == tiles
        assert all(BF16.violations(c, shape, arch) == [] and BF16.accumulators(c) >= 128 for _, c in picks)
    assert (
        BF16.shape_seeds({"m": 2048, "n": 2560, "k": 12288}, arch)[0][0]
        == "wave fill 256x160: 128 tiles in one wave of 132"
    )
    monkeypatch.setattr(warm.shipped, "entries", lambda *args: [])
    problem = Problem(BF16, {"m": 2048, "n": 3072, "k": 8192}, arch)
    seeds = warm.plan(problem, [], "NVIDIA H200", False, 1, 0).seeds
    # the defaults are the second pick already: seeded once
    assert [(s.config["bm"], s.config["bn"], s.source.split(":")[0]) for s in seeds] == [
        (128, 256, "default"),
        (256, 192, "family pick"),
    ]
    assert source_kind(seeds[1].source) == "the family's picks for the shape"  # the report's "trials from" row
    # a pick the warm start has taken already (a nearest shape's best, say) is not seeded twice
    taken = [seeds[1].config]
    assert [s.config["bn"] for s in warm.family_seeds(problem, taken)] == [256]
