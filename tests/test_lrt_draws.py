"""The bulk draws replay ``random.Random`` bit for bit: same LRT files, same generator state afterwards.

The reference builders below are the LRT's files as they were built before the bulk draws (plain
``random`` calls, one ``str.format`` a line); the fast ones must give the same bytes for every seed.
"""

from __future__ import annotations

import random

import pytest

from pytest_longctx.experiments.lrt import draws
from pytest_longctx.experiments.lrt.files import (
    INSTRUCTION,
    LINE,
    SOURCE_VALUES,
    build_file,
    build_source_file,
    shuffled_order,
)

MODES = ["none", "full", "block-1", "block-5", "block-7", "block-100", "block-5000"]


def reference_order(n: int, mode: str, rng: random.Random) -> list[int]:
    order = list(range(1, n + 1))
    if mode == "full":
        rng.shuffle(order)
    elif mode.startswith("block-"):
        size = int(mode.removeprefix("block-"))
        blocks = [order[i:i + size] for i in range(0, n, size)]
        rng.shuffle(blocks)
        order = [line for b in blocks for line in b]
    return order


def reference(n: int, mode: str, rng: random.Random, source: bool) -> tuple[str, list[int], dict[int, int], int]:
    if source:
        values = {i: rng.randint(*SOURCE_VALUES) for i in range(1, n + 1)}
    else:
        values = dict(zip(range(1, n + 1), rng.sample(range(10_000, 100_000), n), strict=True))
    target = rng.randint(1, n)
    order = reference_order(n, mode, rng)
    order.insert(rng.randint(0, n) if source else rng.randint(1, n - 1), 0)
    text = "\n".join(INSTRUCTION.format(k=target) if i == 0 else LINE.format(i=i, value=values[i]) for i in order)
    return text, order, values, target


@pytest.mark.parametrize("source", [False, True], ids=["longctx", "source"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [2, 3, 7, 21, 64, 100, 333, 1000, 2500])
def test_files_equal_the_plain_draws(n: int, mode: str, source: bool) -> None:
    build = build_source_file if source else build_file
    for seed in range(8):
        fast, plain = random.Random(seed * 7919 + n), random.Random(seed * 7919 + n)
        file = build(n, mode, fast)
        text, order, values, target = reference(n, mode, plain, source)
        assert (file.text, list(file.order), file.values, file.target) == (text, order, values, target), seed
        assert file.lines == tuple(text.split("\n"))
        assert fast.getstate() == plain.getstate()  # the next draw of the trial is unchanged too


@pytest.mark.parametrize("n", [10_000, 21_845, 21_846, 30_000])  # around sample()'s switch to its pool branch
def test_large_files_equal_the_plain_draws(n: int) -> None:
    fast, plain = random.Random(n), random.Random(n)
    assert build_file(n, "block-20", fast).text == reference(n, "block-20", plain, False)[0]
    assert fast.getstate() == plain.getstate()


def test_shuffled_order_is_rng_shuffle() -> None:
    for seed in range(20):
        fast, plain = random.Random(seed), random.Random(seed)
        assert shuffled_order(500, "full", fast) == reference_order(500, "full", plain)
        assert fast.random() == plain.random()


def test_stream_primitives() -> None:
    for seed in range(30):
        plain, fast = random.Random(seed), random.Random(seed)
        bounds = [1, 2, 3, 5, 100, 2**16, 2**16 + 1, 2**31 + 3, 2**32 - 1]
        expected = [plain.randrange(b) for b in bounds]
        expected_many = [plain.randrange(1000) for _ in range(300)]
        expected_sample = plain.sample(range(90_000), 200)
        items = list(range(77))
        plain.shuffle(items)
        with draws.Stream(fast) as stream:
            assert [stream.randbelow(b) for b in bounds] == expected
            assert draws.randbelow_many(stream, 1000, 300).tolist() == expected_many
            assert draws.sample_indices(stream, 90_000, 200).tolist() == expected_sample
            mine = list(range(77))
            draws.shuffle(stream, mine)
            assert mine == items
        assert fast.getstate() == plain.getstate()


def test_bulk_draws_refuse_what_they_do_not_replay() -> None:
    with draws.Stream(random.Random(0)) as stream:
        with pytest.raises(ValueError, match="set branch"):
            draws.sample_indices(stream, 100, 90)
        with pytest.raises(ValueError, match="2\\*\\*32"):
            stream.randbelow(2**32)
