"""The sequential gate's statistic and ordering on plain values; its false alarms and power by seeded simulation
over a family of designs (one trial an item and many, accuracy mid and near the ceiling, diffuse and concentrated
drops)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_longctx.dispatch.ordering import by_sample, group_sizes, sample_of_nodeid
from pytest_longctx.results.eprocess import AlarmSequence, draw_drops, item_drops, levels, simulate

#: (items, trials an item, accuracy, intra-item correlation, discordance)
DESIGNS = [(400, 1, 0.85, 0.5, 0.04), (60, 20, 0.7, 0.3, 0.06), (200, 4, 0.95, 0.5, 0.02), (30, 80, 0.5, 0.6, 0.1)]


@pytest.mark.parametrize("design", DESIGNS)
def test_an_unchanged_model_fires_at_most_alpha_of_the_time_at_every_look(design: tuple[float, ...]) -> None:
    items, per_item, accuracy, icc, disc = design
    rng = np.random.default_rng(7)
    x = draw_drops(rng, 2000, int(items), int(per_item), accuracy, disc, icc, 0.0)
    _, fired = simulate(x, 0.0, 0.05, 0.05, 0.1, group=1)  # a look after every item
    assert fired.mean() <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


def test_a_drop_of_exactly_the_margin_fires_at_most_alpha() -> None:
    rng = np.random.default_rng(8)
    x = draw_drops(rng, 2000, 300, 1, 0.85, 0.04, 0.5, 0.05)
    _, fired = simulate(x - (x.mean() - 0.05), 0.05, 0.05, 0.05, 0.1)  # centred exactly on the margin
    assert fired.mean() <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.parametrize("concentrated", [False, True])
def test_a_30_point_collapse_fires_early(concentrated: bool) -> None:
    rng = np.random.default_rng(9)
    x = draw_drops(rng, 500, 400, 1, 0.85, 0.04, 0.5, 0.3, concentrated=concentrated)
    items, fired = simulate(x, 0.0, 0.05, 0.05, 0.1, group=20)
    assert fired.mean() > 0.99 and np.percentile(items, 95) <= 100


def test_a_clear_no_change_settles_before_the_end() -> None:
    rng = np.random.default_rng(10)
    x = draw_drops(rng, 500, 400, 1, 0.85, 0.04, 0.5, 0.0)
    items, fired = simulate(x, 0.0, 0.05, 0.05, 0.1, group=20)
    assert fired.mean() <= 0.05 and items.mean() < 250


def test_the_object_and_the_vectorised_rule_agree() -> None:
    rng = np.random.default_rng(11)
    x = draw_drops(rng, 40, 200, 3, 0.8, 0.05, 0.4, 0.1)
    items, fired = simulate(x, 0.0, 0.05, 0.05, 0.1, group=10)
    for run in range(40):
        alarm = AlarmSequence("t", 0.0, 0.05, 0.05, 0.1, planned=200)
        for i, value in enumerate(x[run]):
            alarm.add(float(value))
            if (i + 1) % 10 == 0 and alarm.look() is not None:
                break
        assert (alarm.n, alarm.settled == "fired") == (items[run], fired[run])


def test_looks_at_uneven_sample_groups_match_the_object() -> None:
    """``looks``: the items fed after each sample group (groups of unequal sizes, as a run's are)."""
    rng = np.random.default_rng(12)
    x = draw_drops(rng, 40, 120, 2, 0.8, 0.05, 0.4, 0.1)
    looks = np.cumsum(np.tile([1, 7, 3, 9], 6))
    items, fired = simulate(x, 0.0, 0.05, 0.05, 0.1, looks=looks)
    assert set(items.tolist()) <= set(looks.tolist())
    for run in range(40):
        alarm = AlarmSequence("t", 0.0, 0.05, 0.05, 0.1, planned=120)
        for i, value in enumerate(x[run]):
            alarm.add(float(value))
            if i + 1 in looks and alarm.look() is not None:
                break
        assert (alarm.n, alarm.settled == "fired") == (items[run], fired[run])


def test_cannot_fire_settles_a_short_remainder() -> None:
    alarm = AlarmSequence("t", 0.0, 0.05, 0.05, 0.1, planned=3)
    for value in (0.0, 0.0):
        alarm.add(value)
    assert alarm.look() == "cannot fire" and alarm.to_json()["verdict"] == "pass"


def test_item_drops_pool_each_items_paired_trials() -> None:
    drops = item_drops([("q1", False, True), ("q1", True, True), ("q2", True, False), ("q3", True, True)])
    assert drops == {"q1": 0.5, "q2": -1.0, "q3": 0.0}
    with pytest.raises(ValueError, match="within"):
        AlarmSequence("t", 0.0, 0.05, 0.05, 0.1, planned=3).add(1.5)


def test_levels_are_bonferroni_over_the_alarms() -> None:
    assert levels(0.05, 4) == (0.0125, 0.025)


def test_order_groups_every_cell_of_one_sample() -> None:
    def item(name: str, sample: int | None) -> SimpleNamespace:
        return SimpleNamespace(name=name, callspec=SimpleNamespace(params={} if sample is None else
                                                                   {"longctx_sample": sample}))

    items = [item("a0", 0), item("a1", 1), item("b0", 0), item("b1", 1), item("plain", None)]
    assert [i.name for i in by_sample(items, "longctx_sample")] == ["plain", "a0", "b0", "a1", "b1"]
    assert sample_of_nodeid("evals/x.py::test_a[100-block-5-s12]") == 12
    assert sample_of_nodeid("evals/x.py::test_a[s3]") == 3 and sample_of_nodeid("x.py::test_b") is None
    assert group_sizes(["t[a-s1]", "t[b-s1]", "t[a-s0]", "u"]) == {0: 1, 1: 2}
