"""The LRT prompt's token count from its structure equals tiktoken's count of the whole text."""

from __future__ import annotations

import random

import pytest

from pytest_longctx.corpus.tokens import TIKTOKEN_NAME, TiktokenCounter
from pytest_longctx.experiments.lrt.files import INSTRUCTION, LINE, build_file, build_source_file
from pytest_longctx.experiments.lrt.prompts import lrt_request
from pytest_longctx.experiments.lrt.tokens import HEADS, INSTRUCTION_BASE, LINE_BASE, prompt_tokens

ANTHROPIC_NAME = TIKTOKEN_NAME + " (approximation of Claude's tokenizer)"  # what AnthropicBackend reports


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


def test_the_premise_every_group_of_up_to_three_digits_is_one_token(counter: TiktokenCounter) -> None:
    groups = [f"{k:0{d}d}" for d in (1, 2, 3) for k in range(10**d)]
    assert [g for g in groups if counter.count(g) != 1] == []


@pytest.mark.parametrize("digits", range(1, 8))
def test_the_constants_are_tiktokens_counts(counter: TiktokenCounter, digits: int) -> None:
    groups = (digits + 2) // 3
    for other in range(1, 8):
        for number in ("5" * digits, "1" + "0" * (digits - 1), "9" * digits):
            for newline in ("", "\n"):
                line = LINE.format(i=number, value="7" * other) + newline
                assert counter.count(line) == LINE_BASE + groups + (other + 2) // 3, line
                instruction = INSTRUCTION.format(k=number) + newline
                assert counter.count(instruction) == INSTRUCTION_BASE + groups + len(newline), instruction
    assert {head: counter.count(head) for head in HEADS} == HEADS


def test_no_tokenizer_is_loaded_for_the_lrt_prompts() -> None:
    def count(text: str) -> int:
        raise AssertionError(f"counted {text[:40]!r}")

    for build in (build_file, build_source_file):
        file = build(300, "block-5", random.Random(1))
        assert prompt_tokens(file, lrt_request(file).messages[0].content, ANTHROPIC_NAME, count) > 300 * LINE_BASE


@pytest.mark.parametrize("build", [build_file, build_source_file], ids=["longctx", "source"])
@pytest.mark.parametrize("lines", [2, 3, 9, 10, 99, 100, 101, 1000, 1001, 2500])
@pytest.mark.parametrize("mode", ["none", "full", "block-5", "block-100"])
def test_structural_count_equals_tiktoken(counter: TiktokenCounter, build, lines: int, mode: str) -> None:
    for seed in range(6):  # the source protocol puts the instruction first or last for some seeds
        file = build(lines, mode, random.Random(seed * 7919 + lines))
        prompt = lrt_request(file).messages[0].content
        assert prompt_tokens(file, prompt, ANTHROPIC_NAME, counter.count) == counter.count(prompt), (lines, seed)


@pytest.mark.parametrize("at", [0, "last"])
def test_instruction_at_either_end(counter: TiktokenCounter, at: int | str) -> None:
    for seed in range(200):
        file = build_source_file(30, "full", random.Random(seed))
        if file.instruction_at == (len(file.order) - 1 if at == "last" else 0):
            prompt = lrt_request(file).messages[0].content
            assert prompt_tokens(file, prompt, TIKTOKEN_NAME, counter.count) == counter.count(prompt)
            return
    pytest.fail(f"no seed put the instruction at {at}")


def test_largest_default_size(counter: TiktokenCounter) -> None:
    file = build_file(10_000, "block-20", random.Random(3))
    prompt = lrt_request(file).messages[0].content
    assert prompt_tokens(file, prompt, ANTHROPIC_NAME, counter.count) == counter.count(prompt)


def test_other_tokenizers_count_the_whole_prompt() -> None:
    file = build_file(50, "full", random.Random(0))
    prompt = lrt_request(file).messages[0].content
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return 7

    assert prompt_tokens(file, prompt, "local/smollm2", count) == 7
    assert seen == [prompt]
    seen.clear()
    assert prompt_tokens(file, prompt + " trailing", TIKTOKEN_NAME, count) == 7  # not a prompt ending in the file
    assert seen == [prompt + " trailing"]


def test_an_unknown_header_is_counted_by_the_model_counter(counter: TiktokenCounter) -> None:
    file = build_file(120, "full", random.Random(5))
    prompt = "Another header, then the file:\n" + file.text
    assert prompt_tokens(file, prompt, TIKTOKEN_NAME, counter.count) == counter.count(prompt)


def test_the_reports_value_ranges_are_the_drawn_ones() -> None:
    from pytest_longctx.experiments.lrt.conditions import VALUE_RANGES
    from pytest_longctx.experiments.lrt.files import LONGCTX_VALUES, SOURCE_VALUES

    assert VALUE_RANGES == {"source": SOURCE_VALUES, "longctx": LONGCTX_VALUES}


def test_the_controllers_report_path_loads_no_numpy_or_sdk() -> None:
    """The controller writes the LRT report at the end of every run: numpy (~0.3 s), tiktoken and the SDK stay out."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import pytest_longctx.plugin, pytest_longctx.session.run, pytest_longctx.reporting.html\n"
            "import pytest_longctx.experiments.lrt.plugin, pytest_longctx.experiments.lrt.report\n"
            "print(sorted(m for m in ('numpy', 'tiktoken', 'anthropic') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
