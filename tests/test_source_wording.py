"""The LRT and docs source-protocol prompts are the sources' wording, word for word.

Checked against the sources themselves in ``../shared/seeds`` (skipped when that folder is absent).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_longctx.experiments.docs.source import GENERATE, JUDGE
from pytest_longctx.experiments.lrt.files import INSTRUCTION, LINE, build_source_file
from pytest_longctx.experiments.lrt.prompts import LRT_SOURCE, lrt_request

SEEDS = Path(__file__).resolve().parent.parent.parent / "shared" / "seeds"
LRT_README = SEEDS / "002_3ad17501e0e09ca8.txt"
SNORKEL = SEEDS / "003_ccebb67fa7538b2d.txt"


def source(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"{path} not found: the sources live in ../shared/seeds beside the checkout")
    return path.read_text(encoding="utf-8")


def test_lrt_header_line_and_instruction_are_the_readmes() -> None:
    readme = source(LRT_README)
    assert INSTRUCTION.replace("{k}", "{i}") in readme
    assert "line {i}: REGISTER_CONTENT is <{random.randint(1, 10000)}>" in readme
    assert LINE == "line {i}: REGISTER_CONTENT is <{value}>"
    sample = readme.split("Here is how a sample prompt looks like", 1)[1]
    assert sample.split("```\n", 1)[1].startswith("Testing Long Context\n\nline 1: REGISTER_CONTENT is <")
    file = build_source_file(3, "none", random.Random(0))
    assert lrt_request(file).messages[0].content == "Testing Long Context\n\n" + "\n".join(file.lines)
    assert LRT_SOURCE.text.startswith("Testing Long Context\n\n")


@pytest.mark.parametrize("template", [GENERATE, JUDGE], ids=lambda t: t.id)
def test_docs_generation_and_judge_prompts_are_the_write_ups(template) -> None:
    assert template.text in source(SNORKEL)
