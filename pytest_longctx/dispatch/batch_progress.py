"""What a batch run shows while it waits: one line, rewritten in place on a terminal, a plain line per change elsewhere.

``longctx batch: 2 batches submitted, 1 ended; requests: 590 processing, 598 succeeded, 3 errored, 9 expired; 1m05s``
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def elapsed_text(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h01m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def size_text(n: int) -> str:
    """``812 B``, ``5.1 kB``, ``145.2 MB`` (decimal units, as the API states its limit)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def progress_text(batches: int, ended: int, counts: Mapping[str, int], elapsed_s: float) -> str:
    """The waiting line: batches submitted and ended, requests by state (canceled only when there are some)."""
    parts = [f"{counts.get('processing', 0):,} processing", f"{counts.get('succeeded', 0):,} succeeded",
             f"{counts.get('errored', 0):,} errored", f"{counts.get('expired', 0):,} expired"]
    if counts.get("canceled"):
        parts.append(f"{counts['canceled']:,} canceled")
    return (f"longctx batch: {batches} batch{'es' if batches != 1 else ''} submitted, {ended} ended; "
            f"requests: {', '.join(parts)}; {elapsed_text(elapsed_s)}")


class StatusLine:
    """Lines for the user: :meth:`update` rewrites one line in place on a terminal (``tty``), and elsewhere
    writes it as a plain line only when its figures changed (``key``), so a log gets one line per change."""

    def __init__(self, write: Callable[[str], None], tty: bool) -> None:
        self._write = write
        self.tty = tty
        self._open = 0  # width of the line being rewritten (0: none)
        self._last_key: object = None

    def update(self, text: str, key: object) -> None:
        if self.tty:
            self._write("\r" + text.ljust(self._open))
            self._open = max(self._open, len(text))
        elif key != self._last_key:
            self._write(text + "\n")
        self._last_key = key

    def line(self, text: str) -> None:
        """A line of its own (after the updating line, which stays as it was last shown)."""
        self.close()
        self._write(text + "\n")

    def close(self) -> None:
        if self._open:
            self._write("\n")
            self._open = 0


def printer(log: Callable[[str], None]) -> StatusLine:
    """A :class:`StatusLine` over a function that prints whole lines (``print``, a terminal writer's ``line``)."""
    return StatusLine(lambda text: log(text.rstrip("\n")), tty=False)
