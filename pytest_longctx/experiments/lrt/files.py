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

import hashlib
import random
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from pytest_longctx.experiments.lrt import draws
from pytest_longctx.experiments.lrt.draws import Ints

# The Little Retrieval Test README ("Experiment Design"), word for word.
INSTRUCTION = ("[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
               "additional text, just the number, then EXIT")
LINE = "line {i}: REGISTER_CONTENT is <{value}>"
_LINE_PCT = "line %d: REGISTER_CONTENT is <%d>\n"  # LINE for str % (one C call renders a whole run of lines)
#: The README's line format draws ``random.randint(1, 10000)``.
SOURCE_VALUES = (1, 10_000)
#: The longctx protocol's values: ``sample(range(10_000, 100_000), n)``.
LONGCTX_VALUES = (10_000, 99_999)
_SHUFFLE = re.compile(r"^(none|full|block-([1-9][0-9]*))$")
_INT = re.compile(r"-?\d+")
_SOURCE_INT = re.compile(r"\d+")  # the source's "simple regex to obtain only the retrieved number"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, eq=False)
class LrtFile:
    """A rendered file and the facts needed to score and explain an answer.

    The line numbers and values are kept as the arrays the file was built from; ``order`` and ``values``
    (tuple and dict) are made only when asked for.
    """

    text: str  # the lines joined by "\n"
    order_array: Ints = field(repr=False)  # line number at each file position (0 = the instruction)
    value_array: Ints = field(repr=False)  # value_array[i - 1]: the value of line i
    target: int  # k
    instruction_at: int  # file position of the instruction
    protocol: str = "longctx"

    @property
    def expected(self) -> int:
        return int(self.value_array[self.target - 1])

    @cached_property
    def order(self) -> tuple[int, ...]:
        """Line number at each file position (0 = the instruction)."""
        return tuple(self.order_array.tolist())

    @cached_property
    def values(self) -> dict[int, int]:
        """Line number -> value."""
        return dict(zip(range(1, len(self.value_array) + 1), self.value_array.tolist(), strict=True))

    @cached_property
    def lines(self) -> tuple[str, ...]:
        return tuple(self.text.split("\n"))

    @cached_property
    def digest(self) -> str:
        """The file's identity (protocol, line order, values, asked line, instruction place): its item id."""
        h = hashlib.sha256(f"{self.protocol}|{self.target}|{self.instruction_at}|".encode())
        h.update(np.ascontiguousarray(self.order_array, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(self.value_array, dtype=np.int64).tobytes())
        return h.hexdigest()[:16]

    def value_of(self, line: int) -> int | None:
        """The value of ``line``, or None if the file has no such line."""
        return int(self.value_array[line - 1]) if 1 <= line <= len(self.value_array) else None

    def position_of(self, line: int) -> int:
        """The file position of ``line`` (0 = the instruction)."""
        return int(np.flatnonzero(self.order_array == line)[0])

    def lines_of_value(self, value: int) -> list[int]:
        """Line numbers holding ``value``, in file order (the source reports the first)."""
        if not _INT64_MIN <= value <= _INT64_MAX:  # an answer no line can hold (and numpy cannot compare)
            return []
        lines = self.order_array[self.order_array != 0]
        return [int(ln) for ln in lines[self.value_array[lines - 1] == value]]

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
    with draws.Stream(rng) as stream:
        return _order(n, mode, stream).tolist()  # type: ignore[no-any-return]


def _order(n: int, mode: str, stream: draws.Stream) -> Ints:
    """Line numbers 1..n in file order: ``rng.shuffle`` of the lines (``full``) or of the blocks (``block-B``)."""
    block = check_shuffle(mode)
    if mode == "none":
        return np.arange(1, n + 1, dtype=np.int64)
    if block is None:  # full
        order = list(range(1, n + 1))
        draws.shuffle(stream, order)
        return np.array(order, dtype=np.int64)
    blocks = list(range(-(-n // block)))  # block b holds lines b*B+1 .. min((b+1)*B, n)
    draws.shuffle(stream, blocks)
    starts = np.array(blocks, dtype=np.int64) * block
    sizes = np.minimum(block, n - starts)
    offsets = np.cumsum(sizes) - sizes
    return np.arange(n, dtype=np.int64) - np.repeat(offsets - starts, sizes) + 1


def _render(order: Ints, values: Ints, at: int, target: int) -> str:
    """The file's text: lines in ``order`` (values[i - 1] on line i), the instruction at position ``at``."""
    flat = np.empty(2 * len(order), dtype=np.int64)
    flat[0::2] = order
    flat[1::2] = values[order - 1]
    args = flat.tolist()
    parts = [(_LINE_PCT * (len(chunk) // 2) % tuple(chunk))[:-1] for chunk in (args[:2 * at], args[2 * at:])]
    return "\n".join(part for part in (parts[0], INSTRUCTION.format(k=target), parts[1]) if part)


def _file(order: Ints, values: Ints, target: int, at: int, protocol: str) -> LrtFile:
    file_order = np.insert(order, at, 0)
    for array in (file_order, values):
        array.flags.writeable = False  # the file is frozen: so are its arrays
    return LrtFile(text=_render(order, values, at, target), order_array=file_order, value_array=values,
                   target=target, instruction_at=at, protocol=protocol)


def build_file(n: int, mode: str, rng: random.Random) -> LrtFile:
    """longctx protocol: n lines with distinct random 5-digit values; the instruction strictly inside.

    The draws are ``rng.sample(range(10_000, 100_000), n)``, ``rng.randint(1, n)`` (the target),
    the shuffle, then ``rng.randint(1, n - 1)`` (where the instruction goes), replayed in bulk (:mod:`.draws`).
    """
    if n < 2:
        raise ValueError("an LRT file needs at least 2 lines")
    low, high = LONGCTX_VALUES
    pool = not draws.uses_set_branch(high - low + 1, n)
    if pool:  # more lines than sample()'s set branch takes: its pool branch, as it is
        values = np.array(rng.sample(range(low, high + 1), n), dtype=np.int64)
    with draws.Stream(rng) as stream:
        if not pool:
            values = draws.sample_indices(stream, high - low + 1, n) + low
        target = 1 + stream.randbelow(n)
        order = _order(n, mode, stream)
        at = 1 + stream.randbelow(n - 1)  # strictly inside: never before the first or after the last line
    return _file(order, values, target, at, "longctx")


def build_source_file(n: int, mode: str, rng: random.Random) -> LrtFile:
    """source protocol: values ``randint(1, 10000)`` (repeats allowed), the instruction at any of the n + 1 gaps."""
    if n < 1:
        raise ValueError("an LRT file needs at least 1 line")
    low, high = SOURCE_VALUES
    with draws.Stream(rng) as stream:
        values = draws.randbelow_many(stream, high - low + 1, n) + low
        target = 1 + stream.randbelow(n)
        order = _order(n, mode, stream)
        at = stream.randbelow(n + 1)
    return _file(order, values, target, at, "source")


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
    out.update(miss_line=line, miss_distance=line - file.target,
               miss_file_distance=file.position_of(line) - file.position_of(file.target),
               not_in_file=False, no_number=False)
    if len(holders) > 1:
        out["miss_lines"] = len(holders)
    return out
