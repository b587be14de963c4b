"""`census_from_json`, the reader of the census's JSON record: what `Census.to_json` writes (through a JSON file, as a
bench record or a run's best/census.json keeps it) reads back to the same Census, for kernels with every kind of
view (Hopper's TMA, wgmma, setmaxnreg and clusters; cp.async; parameters' loads; spills); a damaged record is refused
naming its file, and keys a newer writer adds are left out."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import KERNELS

from mage_tune.census import census_path
from mage_tune.census.model import census_from_json
from mage_tune.errors import InputError

CASES = [
    ("hopper/wgmma_tma.cu", "sm_90a"),
    ("hopper/warp_specialized.cu", "sm_90a"),
    ("hopper/cluster_pair.cu", "sm_90"),
    ("cp_async_double.cu", "sm_89"),
    ("vec_scale.cu", "sm_89"),
    ("spill.cu", "sm_90"),
    ("ldmatrix_mma.cu", "sm_80"),
]


@pytest.fixture(scope="module")
def censuses():
    return [c for name, arch in CASES for c in census_path(KERNELS / name, arch=arch)]


def test_what_to_json_writes_reads_back_the_same(censuses):
    for c in censuses:
        again = census_from_json(json.loads(json.dumps(c.to_json())), "census.json")
        assert again == c, c.kernel
    kinds = {
        "bulk": any(c.sass.bulk for c in censuses),
        "setmaxnreg": any(c.sass.setmaxnreg for c in censuses),
        "cluster": any(c.cluster for c in censuses),
        "params": any(c.ptx.params for c in censuses),
        "cp.async": any(c.sass.cp_async for c in censuses),
        "widths": any(c.sass.global_loads for c in censuses),
    }
    assert all(kinds.values()), kinds  # the cases cover every field that needs converting back


def test_a_damaged_record_is_refused_naming_the_file(censuses):
    good = censuses[0].to_json()
    for path, bad in (
        (("sass", "global_loads"), {"wide": 1}),
        (("sass", "wgmma_waits"), "0"),
        (("ptx", "setmaxnreg"), [{"action": "dec"}]),
        (("occupancy", "fraction"), "high"),
        (("registers",), 2.5),
        (("cluster",), {"dims": [2, 1], "explicit": True, "max_rank": None, "source": "PTX"}),
    ):
        record = copy.deepcopy(good)
        *parents, key = path
        target = record
        for part in parents:
            target = target[part]
        target[key] = bad
        with pytest.raises(InputError, match="damaged census record: " + path[0]) as err:
            census_from_json(record, "run/best/census.json")
        assert "run/best/census.json" in str(err.value)
    with pytest.raises(InputError, match="damaged census record"):
        census_from_json([good], "x.json")


def test_keys_a_newer_writer_adds_are_left_out(censuses):
    record = censuses[0].to_json()
    record["future"] = 1
    record["sass"] = {**record["sass"], "future_counter": {"x": 2}}
    record["cluster"] = {"dims": [2, 1, 1], "explicit": True, "max_rank": None, "source": "PTX", "future": 3}
    again = census_from_json(record, "census.json")
    assert again.sass == censuses[0].sass and again.cluster.dims == (2, 1, 1)


def test_explain_shows_a_hopper_winner_s_profile_from_its_kept_census(tmp_path, censuses):
    """`explain` of a run directory reads its winner's best/census.json back and shows its Hopper rows (the census
    table's), a damaged one is said in a line, and a winner with no Hopper feature has none; a bench record's winner
    has the same lines from the census the record keeps."""
    from mage_tune.census.table import hopper_rows
    from mage_tune.measure.explain import explain_bench
    from mage_tune.measure.saved import read_json
    from mage_tune.search.report import explain_text

    hopper = censuses[0]  # wgmma_tma.cu: TMA copies, wgmma, mbarriers, multicast
    trial = {"number": 0, "outcome": "measured", "value": 10.0, "config": {"bm": 64}}
    (tmp_path / "trials.jsonl").write_text(json.dumps(trial) + "\n")
    best = tmp_path / "best"
    best.mkdir()
    (best / "census.json").write_text(json.dumps(hopper.to_json()))
    text = explain_text(tmp_path, with_triton=False)
    rows = hopper_rows(hopper)
    assert len(rows) == 4
    assert "\n  Hopper profile of the winner:\n" in text
    for key, value in rows:
        assert f"\n    {key.removeprefix('Hopper ')}: {value}" in text
    damaged = {**hopper.to_json(), "sass": {"instructions": "many"}}
    (best / "census.json").write_text(json.dumps(damaged))
    text = explain_text(tmp_path, with_triton=False)
    assert f"  Hopper profile: not shown ({best / 'census.json'}: damaged census record: sass" in text
    (best / "census.json").write_text(json.dumps(censuses[-3].to_json()))  # vec_scale: no Hopper feature
    assert "Hopper profile" not in explain_text(tmp_path, with_triton=False)
    (best / "census.json").write_text(json.dumps(hopper.to_json()))  # the census of a kernel not the winner's
    (tmp_path / "trials.jsonl").write_text(json.dumps({**trial, "label": "family[bm=128]"}) + "\n")
    text = explain_text(tmp_path, with_triton=False)
    assert f"  Hopper profile: not shown ({best / 'census.json'} is of {hopper.source}, not the winner)" in text
    (tmp_path / "trials.jsonl").write_text(json.dumps({**trial, "label": hopper.source}) + "\n")
    assert "\n  Hopper profile of the winner:\n" in explain_text(tmp_path, with_triton=False)

    record = read_json(KERNELS.parents[1] / "fixtures" / "data" / "bench_matmul_bf16_4096.json")
    winner = record["results"][0]["label"]
    kept = census_from_json(record["census"][winner], "bench")
    text = explain_bench(record)
    assert "\nHopper profile of the winner:\n" in text and hopper_rows(kept)
    for key, value in hopper_rows(kept):
        assert f"\n  {key.removeprefix('Hopper ')}: {value}" in text


def test_the_census_schema_requires_what_a_view_cannot_do_without():
    """The census record's schema names the View fields by hand (records/ cannot import census/): the ones it
    requires are exactly View's fields without a default, and every width map it declares is one of View's, so a
    field added to View cannot reach census_from_json unchecked."""
    from dataclasses import MISSING, fields

    from mage_tune.census.model import View
    from mage_tune.records.schema import CENSUS_VIEW

    needed = {f.name for f in fields(View) if f.default is MISSING and f.default_factory is MISSING}
    assert set(CENSUS_VIEW["required"]) == needed
    widths = {f.name for f in fields(View) if f.type == "Widths"}
    assert {k for k, v in CENSUS_VIEW["properties"].items() if "propertyNames" in v} == widths
    assert set(CENSUS_VIEW["properties"]) == {f.name for f in fields(View)}
