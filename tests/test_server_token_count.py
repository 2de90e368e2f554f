"""The local server's token count: the ASCII fast path counts exactly what the regex counts."""

from __future__ import annotations

import random

import pytest

from pytest_longctx.server.responders import _TOKEN_RE, approx_token_count


def regex_count(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


@pytest.mark.parametrize("seed", range(5))
def test_ascii_texts_count_as_the_regex_does(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [chr(i) for i in range(128)]  # every ASCII character, controls and separators included
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert approx_token_count(text) == regex_count(text), repr(text)


@pytest.mark.parametrize("text", ["", "Hello, world!", "line 12: REGISTER_CONTENT is <34567>\nline 3",
                                  "a_b  c\x1fd\x00", "héllo, wörld!", "数字 123、テスト", "\u2028x\u00a0y"])
def test_known_texts(text: str) -> None:
    assert approx_token_count(text) == regex_count(text)
    assert approx_token_count("Hello, world!") == 4
