"""The Little Retrieval Test builder really shuffles, keeps blocks intact, and scores misses."""

from __future__ import annotations

import random
import re

import pytest

from pytest_longctx.context.lrt import INSTRUCTION, build_file, explain, first_int, shuffled_order

LINE = re.compile(r"^line (\d+): REGISTER_CONTENT is <(\d+)>$")


def parse(lines: tuple[str, ...]) -> list[int]:
    return [int(m.group(1)) for ln in lines if (m := LINE.match(ln))]


@pytest.mark.parametrize("mode", ["none", "full", "block-1", "block-7", "block-50"])
@pytest.mark.parametrize("seed", range(10))
def test_file_is_a_permutation_with_one_instruction(mode: str, seed: int) -> None:
    f = build_file(300, mode, random.Random(seed))
    numbers = parse(f.lines)
    assert sorted(numbers) == list(range(1, 301))
    instructions = [ln for ln in f.lines if ln.startswith("[EXECUTE THIS]")]
    assert instructions == [INSTRUCTION.format(k=f.target)]
    assert 0 < f.instruction_at < len(f.lines) - 1
    assert len(set(f.values.values())) == 300


def test_ordered_file_is_in_order() -> None:
    f = build_file(100, "none", random.Random(0))
    assert parse(f.lines) == list(range(1, 101))


def test_full_shuffle_changes_order() -> None:
    orders = {tuple(shuffled_order(50, "full", random.Random(s))) for s in range(5)}
    assert tuple(range(1, 51)) not in orders
    assert len(orders) == 5


@pytest.mark.parametrize("block", [5, 10, 33])
def test_block_shuffle_keeps_blocks_intact(block: int) -> None:
    order = shuffled_order(200, f"block-{block}", random.Random(3))
    assert order != list(range(1, 201))
    pos = {line: i for i, line in enumerate(order)}
    for start in range(1, 201, block):
        members = list(range(start, min(start + block, 201)))
        first = pos[members[0]]
        assert [pos[m] for m in members] == list(range(first, first + len(members)))


def test_instruction_position_varies() -> None:
    positions = {build_file(100, "none", random.Random(s)).instruction_at for s in range(40)}
    assert len(positions) > 20


def test_bad_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="shuffle mode"):
        build_file(10, "blocks-3", random.Random(0))


def test_scoring_and_miss_records() -> None:
    f = build_file(200, "full", random.Random(5))
    assert explain(f, f"{f.expected}")["correct"] is True
    assert explain(f, f"The value is {f.expected}.")["correct"] is True
    near = f.target + 2 if f.target + 2 <= 200 else f.target - 2
    miss = explain(f, str(f.values[near]))
    assert miss["correct"] is False
    assert miss["miss_line"] == near and miss["miss_distance"] == near - f.target
    outside = explain(f, "7")
    assert outside["not_in_file"] is True and outside["miss_line"] is None
    assert explain(f, "no idea")["no_number"] is True
    assert first_int("line 12: <345>") == 12
