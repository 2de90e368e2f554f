"""The Little Retrieval Test builder really shuffles, keeps blocks intact, and scores misses."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from pytest_longctx.backends.model_spec import parse_model_spec
from pytest_longctx.experiments.lrt.conditions import lrt_plan
from pytest_longctx.experiments.lrt.files import (
    INSTRUCTION,
    build_file,
    build_source_file,
    explain,
    first_int,
    shuffled_order,
)
from pytest_longctx.experiments.lrt.options import LrtOptions
from pytest_longctx.experiments.lrt.prompts import lrt_request
from pytest_longctx.run_settings import Settings

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
    pos = {ln: p for p, ln in enumerate(f.order)}
    assert miss["miss_file_distance"] == pos[near] - pos[f.target]


@pytest.mark.parametrize("answer", [str(10**30), str(-(10**30)), str(2**63), str(-(2**63) - 1)])
def test_an_answer_beyond_any_int64_is_a_miss_not_in_the_file(answer: str) -> None:
    scored = explain(build_file(50, "full", random.Random(1)), answer)
    assert scored["correct"] is False and scored["not_in_file"] is True and scored["answer_value"] == int(answer)


def test_a_file_and_its_arrays_are_frozen() -> None:
    f = build_file(20, "full", random.Random(2))
    with pytest.raises(ValueError, match="read-only"):
        f.value_array[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        f.order_array[0] = 1
    assert f.value_of(0) is None and f.value_of(21) is None and f.value_of(f.target) == f.expected


# -- the source protocol (The Little Retrieval Test README) -----------------------------------------

def test_source_file_follows_the_readme() -> None:
    gaps = set()
    for seed in range(200):
        f = build_source_file(10, "none", random.Random(seed))
        assert parse(f.lines) == list(range(1, 11))
        assert [ln for ln in f.lines if ln.startswith("[EXECUTE")] == [INSTRUCTION.format(k=f.target)]
        assert all(1 <= v <= 10_000 for v in f.values.values())
        gaps.add(f.instruction_at)
    assert gaps == set(range(0, 11))  # "at a random point in the file": either end included
    request = lrt_request(build_source_file(5, "full", random.Random(1)))
    assert request.messages[0].content.startswith("Testing Long Context\n\nline ")
    assert request.max_tokens == 10 and request.template == "lrt-source@1"


def test_source_values_may_repeat_and_misses_name_the_first_holder() -> None:
    f = next(f for s in range(500) if len(set((f := build_source_file(400, "full", random.Random(s))).values.values()))
             < 400 and any(list(f.values.values()).count(v) > 1 and ln != f.target for ln, v in f.values.items()))
    line, value = next((ln, v) for ln, v in f.values.items() if list(f.values.values()).count(v) > 1
                       and v != f.expected)
    miss = explain(f, f"<{value}>")
    holders = [ln for ln in f.order if ln and f.values[ln] == value]
    assert miss["miss_line"] == holders[0] and miss["miss_lines"] == len(holders) >= 2
    assert line in holders


def test_source_parsing_reads_the_first_digits_without_a_sign() -> None:
    assert first_int("-42 then 7", source=True) == 42
    assert first_int("-42 then 7") == -42
    assert first_int("none", source=True) is None


def _settings(**kw: object) -> Settings:
    base = dict(model=parse_model_spec("anthropic/claude-sonnet-4-5"), seed=0, samples=20, report_dir=Path("r"),
                thresholds=(), compare=None, cache="on", cache_dir=Path("c"), max_concurrency=1,
                context_window=200_000, data_dir=None, judge=parse_model_spec("anthropic/claude-sonnet-4-5"),
                plan=False)
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


def test_source_plan_is_the_readme_sizes_with_50_trials() -> None:
    plan = lrt_plan(_settings(protocol="source"))
    assert plan.lines == [500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 6500]
    assert plan.samples == 50 and plan.shuffles[:2] == ["none", "full"] and plan.note is None
    assert lrt_plan(_settings(protocol="source", samples_given=True)).samples == 50  # a default: the core lets
    # --longctx-samples win over it (session/defaults.samples_for)


def test_lines_option_chooses_sizes_and_names_those_that_do_not_fit() -> None:
    plan = lrt_plan(_settings(context_window=32_768), LrtOptions(lines=(500, 1000, 6500)))
    assert plan.lines == [500, 1000] and plan.skipped == [6500]
    assert plan.note is not None and "6,500 lines not run" in plan.note and "32,768" in plan.note
    local = lrt_plan(_settings(model=parse_model_spec("local/smollm2-135m"), context_window=8192))
    assert (local.lines, local.shuffles, local.samples) == ([20], ["none", "full"], 10)  # the LRT's own CPU defaults


def test_a_prompt_longer_than_the_window_is_an_error_naming_the_option() -> None:
    from pytest_longctx.experiments.lrt.prompts import FileTooLarge, check_fits

    request = lrt_request(build_source_file(50, "none", random.Random(0)))
    check_fits(request, 8182, 8192)
    with pytest.raises(FileTooLarge, match=r"8,183 tokens \(\+10 to answer\) does not fit the model's 8,192-token "
                                           r"window; choose smaller --longctx-lrt-lines"):
        check_fits(request, 8183, 8192)
