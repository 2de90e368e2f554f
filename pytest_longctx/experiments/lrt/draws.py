"""``random.Random``'s draws in bulk, bit for bit: the LRT's files in milliseconds with the same bytes.

Python's ``Random`` is MT19937; numpy's ``MT19937`` bit generator is the same generator and takes the
same state. :class:`Stream` copies a ``Random``'s state into numpy, reads its 32-bit outputs in bulk,
and replays CPython's own algorithms on them (``_randbelow_with_getrandbits``, ``sample``'s set branch,
``shuffle``), then advances the ``Random`` by exactly the outputs used (one ``getrandbits(32 * m)``
call). The results, and the state the ``Random`` is left in, are those of the plain calls
(``tests/test_lrt_draws.py`` compares them over many seeds and sizes). ``getrandbits(k)`` for
``k <= 32`` is one output shifted right by ``32 - k``.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import numpy.typing as npt

Raw = npt.NDArray[np.uint64]
Ints = npt.NDArray[np.int64]


class Stream:
    """The 32-bit outputs of ``rng`` from its current state; :meth:`close` advances ``rng`` past those used.

    Use one stream for all the draws of a file: each costs a numpy bit generator (~0.1 ms). Do not touch
    ``rng`` itself while a stream on it is open.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        _, internal, _ = rng.getstate()
        self._gen = np.random.MT19937()
        self._gen.state = {"bit_generator": "MT19937",
                           "state": {"key": np.array(internal[:624], dtype=np.uint32), "pos": internal[624]}}
        self._buf: Raw = np.empty(0, dtype=np.uint64)
        self.used = 0  # outputs consumed so far

    def peek(self, count: int) -> Raw:
        """The next ``count`` outputs, not yet consumed."""
        short = self.used + count - len(self._buf)
        if short > 0:
            self._buf = np.concatenate([self._buf, self._gen.random_raw(max(short, 1024))])
        return self._buf[self.used:self.used + count]

    def advance(self, count: int) -> None:
        self.used += count

    def randbelow(self, n: int) -> int:
        """``Random._randbelow(n)`` (``n >= 1``); ``randint(a, b)`` is ``a + randbelow(b - a + 1)``."""
        _check(n)
        shift = 32 - n.bit_length()
        while True:
            r = int(self.peek(1)[0]) >> shift
            self.used += 1
            if r < n:
                return r

    def close(self) -> None:
        """Leave ``rng`` where the plain calls would have: ``getrandbits(32 * m)`` takes exactly m outputs."""
        if self.used:
            self.rng.getrandbits(32 * self.used)
        self.used = 0
        self._buf = self._buf[:0]

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(n: int) -> None:
    if not 1 <= n < 2**32:
        raise ValueError(f"bulk draws need 1 <= n < 2**32, got {n}")


def randbelow_many(stream: Stream, n: int, count: int) -> Ints:
    """``count`` calls of ``_randbelow(n)`` (e.g. ``randint(1, n) - 1`` each)."""
    _check(n)
    shift = 32 - n.bit_length()
    look = 2 * count + 64
    while True:
        raw = stream.peek(look) >> np.uint64(shift)
        accepted = np.flatnonzero(raw < n)
        if len(accepted) >= count:
            break
        look *= 2
    if count:
        stream.advance(int(accepted[count - 1]) + 1)
    return raw[accepted[:count]].astype(np.int64)


def uses_set_branch(n: int, k: int) -> bool:
    """Whether ``Random.sample`` of ``k`` out of ``n`` takes its set branch (else its pool branch)."""
    setsize = 21
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    return n > setsize


def sample_indices(stream: Stream, n: int, k: int) -> Ints:
    """``sample(range(n), k)`` for the set branch: the first ``k`` distinct values of ``_randbelow(n)``."""
    _check(n)
    if not uses_set_branch(n, k):
        raise ValueError("sample_indices replays the set branch only")
    if k == 0:
        return np.empty(0, dtype=np.int64)
    shift = 32 - n.bit_length()
    look = 2 * k + 64
    while True:
        raw = stream.peek(look) >> np.uint64(shift)
        where = np.flatnonzero(raw < n)
        values = raw[where].astype(np.int64)
        draw = np.arange(len(values))
        earliest = np.full(n, len(values))
        np.minimum.at(earliest, values, draw)  # each value's first draw
        first = np.flatnonzero(earliest[values] == draw)  # draws that were new, in draw order
        if len(first) >= k:
            break
        look *= 2
    first = first[:k]
    stream.advance(int(where[first[-1]]) + 1)
    return values[first]


def shuffle(stream: Stream, items: list[Any]) -> None:
    """``Random.shuffle(items)`` in place."""
    m = len(items)
    _check(max(m, 1))
    look = 2 * m + 64
    while True:
        try:
            shuffled, used = _fisher_yates(stream.peek(look).tolist(), list(items))
        except IndexError:  # (astronomically rare) more rejections than outputs looked at: look further
            look *= 2
            continue
        stream.advance(used)
        items[:] = shuffled
        return


def _fisher_yates(raw: list[int], x: list[Any]) -> tuple[list[Any], int]:
    """CPython's shuffle loop on the outputs ``raw``: the shuffled ``x`` and how many outputs it used."""
    p = 0
    i = len(x) - 1
    while i >= 1:
        bits = (i + 1).bit_length()
        low = (1 << (bits - 1)) - 1  # the bounds i + 1 of i in [low, i] have the same bit length
        shift = 32 - bits
        while i >= low and i >= 1:
            r = raw[p] >> shift  # _randbelow(i + 1)
            p += 1
            while r > i:
                r = raw[p] >> shift
                p += 1
            x[i], x[r] = x[r], x[i]
            i -= 1
    return x, p
