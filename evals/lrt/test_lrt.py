"""The Little Retrieval Test: report the register value of line k from a file of numbered lines.

Method (The Little Retrieval Test README): a ``Testing Long Context`` header, then ``lines`` lines
``line i: REGISTER_CONTENT is <v>``, ordered, fully shuffled, or shuffled in blocks of B lines; one
``[EXECUTE THIS]`` instruction naming a random line k, inserted at a random place. The first integer
of the answer is compared with line k's value; a miss records which line the value came from and
how far it is from k. ``--longctx-protocol source`` builds the file as the README does (values
1..10000, the instruction anywhere, 500..6500 lines, 50 trials a size); see pytest_longctx/experiments/lrt/.
"""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.lrt.conditions import lrt_plan
from pytest_longctx.experiments.lrt.files import build_file, build_source_file, explain
from pytest_longctx.experiments.lrt.plugin import lrt_options
from pytest_longctx.experiments.lrt.prompts import check_fits, lrt_request
from pytest_longctx.experiments.lrt.tokens import prompt_tokens

pytestmark = pytest.mark.longctx("lrt")


async def test_lrt(longctx, longctx_settings, pytestconfig, lines: int, shuffle: str) -> None:
    protocol = longctx_settings.protocol
    build = build_source_file if protocol == "source" else build_file
    file = build(lines, shuffle, longctx.rng)
    neighbours = tuple(str(v) for k in (file.target - 1, file.target + 1) if (v := file.value_of(k)) is not None)
    request = lrt_request(file)
    # the item (the file) and the template are recorded before asking: also on an errored or planned trial
    longctx.record(item=f"lrt-{file.digest}", protocol=protocol, template=request.template)
    tokens = prompt_tokens(file, request.messages[0].content, longctx.tokenizer, longctx.count_tokens)
    check_fits(request, tokens, longctx.context_window)
    longctx.expect(file.expected, wrong=neighbours or ("0",))
    answer = await longctx.ask(request)
    scored = explain(file, answer)
    longctx.record(answer=scored["answer_value"], target_line=file.target,
                   instruction_at=file.instruction_at, context_tokens=tokens,
                   tokenizer=longctx.tokenizer, size_note=lrt_plan(longctx_settings, lrt_options(pytestconfig)).note,
                   **{k: v for k, v in scored.items() if k not in ("answer_value", "correct")})
    assert scored["correct"], f"line {file.target}: expected {file.expected}, got {scored['answer_value']}"
