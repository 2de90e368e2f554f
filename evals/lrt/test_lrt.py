"""The Little Retrieval Test: report the register value of line k from a file of numbered lines.

Method: ``lines`` lines ``line i: REGISTER_CONTENT is <v>`` with distinct random values, ordered,
fully shuffled, or shuffled in blocks of B lines; one ``[EXECUTE THIS]`` instruction naming a random
line k, inserted at a random place inside the file. The first integer of the answer is compared
with line k's value; a miss records which line the value came from and how far it is from k.
"""

from __future__ import annotations

import pytest

from pytest_longctx import Oracle, Request
from pytest_longctx.context.lrt import build_file, explain
from pytest_longctx.prompts.templates import LRT

pytestmark = pytest.mark.longctx("lrt")


async def test_lrt(longctx, lines: int, shuffle: str) -> None:
    file = build_file(lines, shuffle, longctx.rng)
    neighbours = tuple(str(file.values[k]) for k in (file.target - 1, file.target + 1) if k in file.values)
    answer = await longctx.ask(Request.user(LRT.render(file=file.text), max_tokens=16, template=LRT.ref),
                               oracle=Oracle(str(file.expected), neighbours or ("0",)))
    scored = explain(file, answer)
    longctx.record(expected=file.expected, answer=scored["answer_value"], item=f"line-{file.target}",
                   target_line=file.target, instruction_at=file.instruction_at, tokenizer=longctx.tokenizer,
                   **{k: v for k, v in scored.items() if k not in ("answer_value", "correct")})
    assert scored["correct"], f"line {file.target}: expected {file.expected}, got {scored['answer_value']}"
