"""Demo eval: find a passkey hidden in filler text. The smallest complete experiment."""

from __future__ import annotations

import pytest

from pytest_longctx import Request

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("filler_sentences", [10, 40])
async def test_passkey(longctx, filler_sentences: int) -> None:
    keys = [longctx.rng.randrange(10_000, 99_999) for _ in range(4)]
    key = keys[0]
    cut = longctx.rng.randrange(filler_sentences + 1)
    text = FILLER * cut + f"The pass key is {key}. Remember it. " + FILLER * (filler_sentences - cut)
    prompt = f"{text}\n\nWhat is the pass key? Answer with the number only."
    longctx.expect(key, wrong=keys[1:])
    answer = await longctx.ask(Request.user(prompt, max_tokens=16, template="demo-passkey@1"))
    longctx.record(answer=answer.strip())
    assert str(key) in answer
