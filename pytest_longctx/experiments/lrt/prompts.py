"""The LRT's prompt: the file itself, under the README's ``Testing Long Context`` header.

Source: The Little Retrieval Test README (``../shared/seeds/002_3ad17501e0e09ca8.txt``, "Here is how
a sample prompt looks like"): the header line, a blank line, then the register lines with the
instruction among them, sent as the whole prompt (one user turn). The published script asked for at
most 10 output tokens at temperature 0. The header belongs to the method, so the longctx protocol
sends it too.
"""

from __future__ import annotations

from pytest_longctx import Request
from pytest_longctx.errors import LongctxError
from pytest_longctx.experiments.lrt.files import LrtFile
from pytest_longctx.templates import Template

#: README sample prompt, word for word: "Testing Long Context", a blank line, the file.
HEADER = "Testing Long Context"
LRT = Template("lrt-file", 2, HEADER + "\n\n{file}")
LRT_SOURCE = Template("lrt-source", 1, HEADER + "\n\n{file}")
#: little_retrieval_test.py: max_tokens_to_sample=10.
SOURCE_MAX_TOKENS = 10
MAX_TOKENS = 16
TEMPLATES = (LRT, LRT_SOURCE)


class FileTooLarge(LongctxError):
    """An LRT prompt longer than the model's window (the size estimate was off for its tokenizer)."""


def check_fits(request: Request, tokens: int, window: int) -> None:
    """Raise :class:`FileTooLarge` (the trial is an error, not a wrong answer) when the prompt cannot fit."""
    if tokens + request.max_tokens > window:
        raise FileTooLarge(f"LRT prompt of {tokens:,} tokens (+{request.max_tokens} to answer) does not fit the "
                           f"model's {window:,}-token window; choose smaller --longctx-lrt-lines")


def lrt_request(file: LrtFile) -> Request:
    """The request for one file under its protocol's template and output length."""
    if file.protocol == "source":
        return Request.user(LRT_SOURCE.render(file=file.text), max_tokens=SOURCE_MAX_TOKENS, template=LRT_SOURCE.ref)
    return Request.user(LRT.render(file=file.text), max_tokens=MAX_TOKENS, template=LRT.ref)
