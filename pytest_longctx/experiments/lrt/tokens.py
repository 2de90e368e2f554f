"""An LRT prompt's token count from the file's structure instead of tokenizing ~100K tokens per trial.

Under cl100k_base (tiktoken; the approximation of Claude's tokenizer and OpenAI's), text splits into
pre-tokenizer pieces that never run past a newline followed by a non-space character, and BPE merges
only within a piece, so the prompt's count is the sum of its lines' counts. Numbers split into groups
of at most three digits, each one token. So a register line ``line {i}: REGISTER_CONTENT is <{v}>``
is 8 tokens (its ``>`` and newline are one) plus one per digit group of ``i`` and of ``v``; the
instruction line is 28 plus the digit groups of ``k``, plus 1 for a newline after it; the README's
header with its blank line is 4. The whole count is then arithmetic: no tokenizer is loaded (~0.4 s a
process) and nothing is tokenized (~170 ms for 10,000 lines). ``tests/test_lrt_tokens.py`` checks
these constants against tiktoken for every digit count and the result against tiktoken's count of the
whole prompt over both protocols, every shuffle mode and many seeds (cl100k_base's file is pinned by
its sha256). Any other tokenizer counts the whole text.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pytest_longctx.corpus.tokens import TIKTOKEN_NAME
from pytest_longctx.experiments.lrt.files import LrtFile
from pytest_longctx.experiments.lrt.prompts import HEADER

#: Tokenizers (by the name a backend reports, which may add a note) whose counts are computed here.
ADDITIVE = (TIKTOKEN_NAME,)
#: cl100k_base: a register line without its digit groups (with or without its newline: ``>\n`` is one token).
LINE_BASE = 8
#: cl100k_base: the instruction line without the digit groups of k and without a newline after it.
INSTRUCTION_BASE = 28
#: cl100k_base counts of the text before the file, per template header.
HEADS = {HEADER + "\n\n": 4}
_POWERS = np.array([10**p for p in range(1, 19)], dtype=np.int64)


def digit_groups(numbers: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Tokens cl100k_base spends on each non-negative integer: one per group of up to three digits."""
    digits = np.searchsorted(_POWERS, numbers, side="right") + 1
    return (digits + 2) // 3


def prompt_tokens(file: LrtFile, prompt: str, tokenizer: str, count: Callable[[str], int]) -> int:
    """Tokens of ``prompt`` (a template around ``file.text``, which it must end with) under ``tokenizer``.

    ``count`` is the model's own counter: it counts the whole prompt under any other tokenizer, and the text
    before the file if that is not a known header.
    """
    if not tokenizer.startswith(ADDITIVE) or not prompt.endswith(file.text) or not file.text:
        return count(prompt)
    head = prompt[: len(prompt) - len(file.text)]
    if head and not head.endswith("\n"):  # the template's last piece would run into the first line
        return count(prompt)
    order = np.asarray(file.order_array, dtype=np.int64)
    values = np.concatenate(([0], np.asarray(file.value_array, dtype=np.int64)))  # values[i]: line i's value
    if (values < 0).any() or (order < 0).any() or file.target < 0:  # a sign is a piece of its own
        return count(prompt)
    total = (HEADS[head] if head in HEADS else count(head)) if head else 0
    at = np.flatnonzero(order == 0)
    if len(at):
        total += INSTRUCTION_BASE + int(digit_groups(np.array([file.target]))[0]) + int(at[0] != len(order) - 1)
    lines = order[order != 0]
    return total + len(lines) * LINE_BASE + int(digit_groups(lines).sum() + digit_groups(values[lines]).sum())
