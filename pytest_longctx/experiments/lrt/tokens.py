"""An LRT prompt's token count from the file's structure instead of tokenizing ~100K tokens per trial.

Under cl100k_base (tiktoken; the approximation of Claude's tokenizer and OpenAI's), text splits into
pre-tokenizer pieces that never run past a newline followed by a non-space character, and BPE merges
only within a piece, so the prompt's count is the sum of its lines' counts (each with its newline).
A register line ``line {i}: REGISTER_CONTENT is <{v}>`` tokenizes its numbers in groups of at most three
digits, each one token, so its count depends only on how many digits ``i`` and ``v`` have. Each such
class is counted once by the real counter on a line of that shape, the header and the instruction
line exactly as they are; the rest is arithmetic. ``tests/test_lrt_tokens.py`` checks the result
against tiktoken over both protocols, every shuffle mode and many seeds. Any other tokenizer counts
the whole text.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pytest_longctx.corpus.tokens import TIKTOKEN_NAME
from pytest_longctx.experiments.lrt.files import INSTRUCTION, LINE, LrtFile

#: Tokenizers (by the name a backend reports, which may add a note) for which counts add up line by line.
ADDITIVE = (TIKTOKEN_NAME,)
_DIGIT_BOUNDS = np.array([10, 100, 1_000, 10_000, 100_000, 1_000_000], dtype=np.int64)


def prompt_tokens(file: LrtFile, prompt: str, tokenizer: str, count: Callable[[str], int]) -> int:
    """Tokens of ``prompt`` (a template around ``file.text``, which it must end with) under ``tokenizer``.

    ``count`` is the model's own counter; it counts the whole prompt unless ``tokenizer`` is additive.
    """
    if not tokenizer.startswith(ADDITIVE) or not prompt.endswith(file.text) or not file.text:
        return count(prompt)
    head = prompt[: len(prompt) - len(file.text)]
    if head and not head.endswith("\n"):  # the template's last piece would run into the first line
        return count(prompt)
    total = count(head) if head else 0
    order = np.asarray(file.order, dtype=np.int64)
    last = len(order) - 1
    at = int(np.flatnonzero(order == 0)[0]) if (order == 0).any() else -1
    if at >= 0:
        total += count(INSTRUCTION.format(k=file.target) + ("\n" if at != last else ""))
    lines = order[order != 0]
    numbers = np.fromiter(file.values.keys(), dtype=np.int64, count=len(file.values))
    values = np.zeros(int(numbers.max()) + 1, dtype=np.int64)
    values[numbers] = np.fromiter(file.values.values(), dtype=np.int64, count=len(file.values))
    if (values < 0).any():  # a sign is its own piece: not a shape counted here
        return count(prompt)
    line_digits = np.searchsorted(_DIGIT_BOUNDS, lines, side="right") + 1
    value_digits = np.searchsorted(_DIGIT_BOUNDS, values[lines], side="right") + 1
    newline = np.ones(len(lines), dtype=np.int64)
    if order[last] != 0:
        newline[-1] = 0  # the file's last line has no newline after it
    classes = (line_digits * 10 + value_digits) * 2 + newline
    found, per_class = np.unique(classes, return_counts=True)
    for cls, n in zip(found.tolist(), per_class.tolist(), strict=True):
        digits, nl = divmod(cls, 2)
        d_line, d_value = divmod(digits, 10)
        shape = LINE.format(i="5" * d_line, value="5" * d_value) + ("\n" if nl else "")
        total += n * count(shape)
    return total
