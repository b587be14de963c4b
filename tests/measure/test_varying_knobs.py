"""The knobs that tell a record's variants apart, as the analysis tables name their rows."""

from mage_tune.measure.saved import varying_knobs


def test_a_knob_only_a_later_config_has_varies_and_keeps_its_first_place():
    configs = [{"bm": 128, "bn": 192}, {"bm": 128, "bn": 256, "stagger": 2}, {"bm": 128, "bn": 192, "stagger": 0}]
    assert varying_knobs(configs) == ["bn", "stagger"]


def test_list_values_compare_by_content_and_equal_values_do_not_vary():
    configs = [{"cluster": [2, 1], "bm": 64}, {"cluster": [2, 1], "bm": 64}, {"cluster": [1, 2], "bm": 64}]
    assert varying_knobs(configs) == ["cluster"]
    assert varying_knobs(configs[:2]) == []
    assert varying_knobs([]) == []
