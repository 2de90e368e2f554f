"""LRT files: numbered register lines, one ``[EXECUTE THIS]`` instruction, optional shuffling.

Two protocols build them (``--longctx-protocol``):

* ``source``, as the Little Retrieval Test's README describes it (``../shared/seeds/002_*.txt``):
  values ``random.randint(1, 10000)`` (repeats allowed), the instruction "at a random point in the
  file" (any of the n + 1 gaps, the ends included), the answer's first ``\\d+`` compared with the
  value.
* ``longctx`` (this suite's): distinct 5-digit values (so a wrong value names exactly one line),
  the instruction strictly inside the file, the first (possibly negative) integer compared.

Both really shuffle (the published script discarded its shuffle): ``full`` permutes lines,
``block-B`` permutes blocks of B consecutive lines and keeps each block intact, ``none`` keeps the
order. The instruction is inserted after shuffling, exactly once.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# The Little Retrieval Test README ("Experiment Design"), word for word.
INSTRUCTION = ("[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
               "additional text, just the number, then EXIT")
LINE = "line {i}: REGISTER_CONTENT is <{value}>"
#: The README's line format draws ``random.randint(1, 10000)``.
SOURCE_VALUES = (1, 10_000)
_SHUFFLE = re.compile(r"^(none|full|block-([1-9][0-9]*))$")
_INT = re.compile(r"-?\d+")
_SOURCE_INT = re.compile(r"\d+")  # the source's "simple regex to obtain only the retrieved number"


@dataclass(frozen=True)
class LrtFile:
    """A rendered file and the facts needed to score and explain an answer."""

    lines: tuple[str, ...]
    order: tuple[int, ...]  # line number at each file position (0 = the instruction)
    values: dict[int, int]  # line number -> value
    target: int  # k
    instruction_at: int  # file position of the instruction
    protocol: str = "longctx"

    @property
    def expected(self) -> int:
        return self.values[self.target]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def lines_of_value(self, value: int) -> list[int]:
        """Line numbers holding ``value``, in file order (the source reports the first)."""
        return [ln for ln in self.order if ln and self.values[ln] == value]

    def line_of_value(self, value: int) -> int | None:
        found = self.lines_of_value(value)
        return found[0] if found else None


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


def _render(order: list[int], values: dict[int, int], target: int) -> tuple[str, ...]:
    return tuple(INSTRUCTION.format(k=target) if i == 0 else LINE.format(i=i, value=values[i]) for i in order)


def build_file(n: int, mode: str, rng: random.Random) -> LrtFile:
    """longctx protocol: n lines with distinct random 5-digit values; the instruction strictly inside."""
    if n < 2:
        raise ValueError("an LRT file needs at least 2 lines")
    values = dict(zip(range(1, n + 1), rng.sample(range(10_000, 100_000), n), strict=True))
    target = rng.randint(1, n)
    order = shuffled_order(n, mode, rng)
    at = rng.randint(1, n - 1)  # strictly inside: never before the first or after the last line
    order.insert(at, 0)
    return LrtFile(lines=_render(order, values, target), order=tuple(order), values=values, target=target,
                   instruction_at=at)


def build_source_file(n: int, mode: str, rng: random.Random) -> LrtFile:
    """source protocol: values ``randint(1, 10000)`` (repeats allowed), the instruction at any of the n + 1 gaps."""
    if n < 1:
        raise ValueError("an LRT file needs at least 1 line")
    values = {i: rng.randint(*SOURCE_VALUES) for i in range(1, n + 1)}
    target = rng.randint(1, n)
    order = shuffled_order(n, mode, rng)
    at = rng.randint(0, n)
    order.insert(at, 0)
    return LrtFile(lines=_render(order, values, target), order=tuple(order), values=values, target=target,
                   instruction_at=at, protocol="source")


def first_int(text: str, *, source: bool = False) -> int | None:
    """The answer's first integer (the source protocol: its first run of digits, no sign)."""
    m = (_SOURCE_INT if source else _INT).search(text)
    return int(m.group()) if m else None


def explain(file: LrtFile, answer: str) -> dict[str, object]:
    """Score an answer: the first integer against the expected value; on a miss, where it came from.

    ``miss_line`` is the first line in file order holding the answered value (the source prints
    that line); ``miss_lines`` counts the lines holding it (values repeat under the source protocol).
    """
    got = first_int(answer, source=file.protocol == "source")
    out: dict[str, object] = {"answer_value": got, "correct": got == file.expected}
    if got is None or got == file.expected:
        out.update(miss_line=None, miss_distance=None, miss_file_distance=None,
                   not_in_file=False, no_number=got is None)
        return out
    holders = file.lines_of_value(got)
    if not holders:
        out.update(miss_line=None, miss_distance=None, miss_file_distance=None, not_in_file=True, no_number=False)
        return out
    line = holders[0]
    pos = {ln: p for p, ln in enumerate(file.order)}
    out.update(miss_line=line, miss_distance=line - file.target, miss_file_distance=pos[line] - pos[file.target],
               not_in_file=False, no_number=False)
    if len(holders) > 1:
        out["miss_lines"] = len(holders)
    return out
