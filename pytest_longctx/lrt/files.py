"""The Little Retrieval Test: numbered register lines, one instruction, optional shuffling.

Unlike the original script (whose shuffle result was discarded), shuffling really happens:
``full`` permutes lines, ``block-B`` permutes blocks of B consecutive lines and keeps each block
intact, ``none`` keeps the order. The instruction line is inserted after shuffling, at a random
place strictly inside the file, exactly once.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

INSTRUCTION = ("[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
               "additional text, just the number, then EXIT")
LINE = "line {i}: REGISTER_CONTENT is <{value}>"
_SHUFFLE = re.compile(r"^(none|full|block-([1-9][0-9]*))$")
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class LrtFile:
    """A rendered file and the facts needed to score and explain an answer."""

    lines: tuple[str, ...]
    order: tuple[int, ...]  # line number at each file position (0 = the instruction)
    values: dict[int, int]  # line number -> value
    target: int  # k
    instruction_at: int  # file position of the instruction

    @property
    def expected(self) -> int:
        return self.values[self.target]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def line_of_value(self, value: int) -> int | None:
        for line, v in self.values.items():
            if v == value:
                return line
        return None


def check_shuffle(mode: str) -> int | None:
    """Validate a shuffle mode; return the block size for ``block-B`` (None otherwise)."""
    m = _SHUFFLE.match(mode)
    if not m:
        raise ValueError(f"shuffle mode must be none, full or block-<B>, got {mode!r}")
    return int(m.group(2)) if m.group(2) else None


def shuffled_order(n: int, mode: str, rng: random.Random) -> list[int]:
    """Line numbers 1..n in file order under ``mode``."""
    block = check_shuffle(mode)
    order = list(range(1, n + 1))
    if mode == "full":
        rng.shuffle(order)
    elif block is not None:
        blocks = [order[i:i + block] for i in range(0, n, block)]
        rng.shuffle(blocks)
        order = [line for b in blocks for line in b]
    return order


def build_file(n: int, mode: str, rng: random.Random) -> LrtFile:
    """n register lines with distinct random 5-digit values; target k and the instruction placed at random."""
    if n < 2:
        raise ValueError("an LRT file needs at least 2 lines")
    values = dict(zip(range(1, n + 1), rng.sample(range(10_000, 100_000), n), strict=True))
    target = rng.randint(1, n)
    order = shuffled_order(n, mode, rng)
    at = rng.randint(1, n - 1)  # strictly inside: never before the first or after the last line
    order.insert(at, 0)
    lines = tuple(INSTRUCTION.format(k=target) if i == 0 else LINE.format(i=i, value=values[i]) for i in order)
    return LrtFile(lines=lines, order=tuple(order), values=values, target=target, instruction_at=at)


def first_int(text: str) -> int | None:
    m = _INT.search(text)
    return int(m.group()) if m else None


def explain(file: LrtFile, answer: str) -> dict[str, object]:
    """Score an answer: the first integer against the expected value; on a miss, where it came from."""
    got = first_int(answer)
    out: dict[str, object] = {"answer_value": got, "correct": got == file.expected}
    if got is None or got == file.expected:
        out.update(miss_line=None, miss_distance=None, miss_file_distance=None,
                   not_in_file=False, no_number=got is None)
        return out
    line = file.line_of_value(got)
    if line is None:
        out.update(miss_line=None, miss_distance=None, miss_file_distance=None, not_in_file=True, no_number=False)
        return out
    pos = {ln: p for p, ln in enumerate(file.order)}
    out.update(miss_line=line, miss_distance=line - file.target, miss_file_distance=pos[line] - pos[file.target],
               not_in_file=False, no_number=False)
    return out
