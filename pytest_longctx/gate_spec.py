"""What a run asks of its gate: threshold expressions (their grammar and parsing), the false-alarm level, the
effective length's accuracy bar. The gate that decides on them is ``results/gate.py``; matching them to a run's
cells is ``results/thresholds.py``.

Grammar: ``SELECTOR:CHECK[/READING][/each][@n=N]`` (docs/ci-gating.md has the full story).

* SELECTOR is ``*`` or comma-separated ``key=value`` pairs matched against a cell's experiment and condition
  params (values may be shell globs: ``shuffle=block-*``). **The threshold pools every cell it matches**: one
  estimate over all their trials, its interval counting clusters (independent items), not trials.
* CHECK is ``min=A`` (or a bare ``A``): pooled accuracy against A; ``max-drop=X``: the pooled drop against
  the compared run (``--longctx-compare``), over trials paired on items; ``min-effective-length=T``: the
  effective context length in tokens (the longest length whose accuracy stays >= ``--longctx-effective-accuracy``).
* READING says what the data must show:
  - ``alarm`` (the default): fail only when the data show the bad thing: accuracy below A, a drop larger than X
    (X may be 0), an effective length below T. The gate's alarms together raise a false alarm on an unchanged
    model at most ``--longctx-alpha`` of the time (one-sided tests, Holm's correction across them).
  - ``shown`` (non-inferiority): fail unless the data show the good thing at 1 - alpha (one-sided): accuracy at
    least A, a drop below X, an effective length of at least T. A run too small to show it fails, and the check
    says about how many samples would.
  - ``point``: compare the bare estimate, no statistics.
  ``/sig`` (this plugin's older spelling) means ``alarm``.
* ``/each``: check every matched cell on its own instead of pooling; an alarm's cells are Holm-corrected.
* ``@n=N``: a check over fewer than N clusters is ``too-few`` instead of pass or fail.

The gate fails closed: a threshold that matches no cell, checks nothing (too few clusters), needs a compared
run that is missing or that shares no paired trial, or asks an effective length of cells without a length axis
is a gate *error* (status ``error``, one line each, exit code ``results.thresholds.GATE_ERROR_EXIT_CODE``), never
a pass.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_longctx.errors import UsageError

KINDS = ("min", "max-drop", "min-effective-length")
READINGS = ("alarm", "shown", "point")
#: The gate's family-wise false-alarm rate, by default (--longctx-alpha).
DEFAULT_ALPHA = 0.05
#: Accuracy a length must reach to count toward the effective length, by default (--longctx-effective-accuracy):
#: RULER's bar (Llama-2-7B's score at 4K tokens, 85.6%), rounded.
DEFAULT_EFFECTIVE_ACCURACY = 0.85
EXAMPLE = "'*:0.8', 'experiment=lrt:max-drop=0' or 'experiment=lrt:min-effective-length=32000/shown'"


@dataclass(frozen=True)
class Threshold:
    """One parsed gate expression."""

    text: str
    selector: tuple[tuple[str, str], ...]
    kind: str  # "min" | "max-drop" | "min-effective-length"
    value: float
    reading: str = "alarm"
    each: bool = False
    min_n: int = 1

    @property
    def relative(self) -> bool:
        """Whether it compares with an earlier run (``--longctx-compare``)."""
        return self.kind == "max-drop"

    def canonical(self) -> str:
        """The expression in its canonical spelling: ``parse_threshold(t.canonical())`` gives ``t`` back."""
        selector = ",".join(f"{k}={v}" for k, v in self.selector) or "*"
        value = int(self.value) if self.kind == "min-effective-length" else repr(self.value)
        spec = f"{self.kind}={value}/{self.reading}" + ("/each" if self.each else "")
        return f"{selector}:{spec}" + (f"@n={self.min_n}" if self.min_n != 1 else "")

    def matches(self, experiment: str, params: Mapping[str, Any]) -> bool:
        for key, pattern in self.selector:
            if key == "experiment":
                actual = experiment
            elif key in params:
                value = params[key]
                actual = value if isinstance(value, str) else json.dumps(value)
            else:
                return False
            if not fnmatch.fnmatchcase(actual, pattern):
                return False
        return True


@dataclass(frozen=True)
class GateSettings:
    """What the gate reads of a run's settings (``results/decide.py``): a run's ``Settings.gate``, or the settings
    ``longctx-gate`` reads from a record and its own options."""

    thresholds: tuple[Threshold, ...]
    alpha: float = DEFAULT_ALPHA
    compare: Path | None = None
    compare_partial: bool = False
    effective_accuracy: float = DEFAULT_EFFECTIVE_ACCURACY
    seed: int = 0
    samples: int = 0
    samples_all: bool = False
    protocol: str = "longctx"
    plan: bool = False


def unique(thresholds: Iterable[Threshold]) -> tuple[Threshold, ...]:
    """Thresholds without repeats: the same check spelled twice (same canonical form) is one alarm, the first
    spelling kept (Holm, the sequential gate and the plan count it once)."""
    seen: dict[str, Threshold] = {}
    for t in thresholds:
        seen.setdefault(t.canonical(), t)
    return tuple(seen.values())


def parse_threshold(text: str, *, flag: str = "--longctx-threshold") -> Threshold:
    """Parse one expression; a malformed one raises a one-line UsageError quoting it."""
    def bad(why: str) -> UsageError:
        return UsageError(f"{flag}: {why} in {text!r} (expected e.g. {EXAMPLE}; see docs/ci-gating.md)")

    body, _, min_n_part = text.strip().partition("@")
    selector_text, sep, spec = body.rpartition(":")
    if not sep or not selector_text.strip() or not spec.strip():
        raise bad("missing SELECTOR:CHECK")
    selector: list[tuple[str, str]] = []
    if selector_text.strip() != "*":
        for part in selector_text.split(","):
            key, eq, pattern = part.partition("=")
            if not eq or not key.strip() or not pattern.strip():
                raise bad(f"selector part {part!r} is not key=value")
            selector.append((key.strip(), pattern.strip()))
    check, *modifiers = [m.strip() for m in spec.strip().split("/")]
    kind, eq, number = check.partition("=")
    if not eq:
        kind, number = "min", check
    if kind not in KINDS:
        raise bad(f"unknown check {kind!r} (one of {', '.join(KINDS)})")
    value = _float(number, bad)
    if kind == "min-effective-length":
        if value <= 0 or value != int(value):
            raise bad("an effective length is a whole number of tokens above 0")
    elif not 0 <= value <= 1:
        raise bad("accuracy and drops are between 0 and 1")
    reading, each = "alarm", False
    for modifier in modifiers:
        if modifier in READINGS or modifier == "sig":
            reading = "alarm" if modifier == "sig" else modifier
        elif modifier == "each":
            each = True
        elif modifier.startswith("sig="):
            raise bad("a threshold has no significance level of its own any more: the gate holds its false alarms "
                      "at --longctx-alpha (default 0.05) across all its checks; drop '=…'")
        else:
            raise bad(f"unknown suffix {modifier!r} (alarm, shown, point or each)")
    if kind == "min-effective-length" and each:
        raise bad("an effective length spans lengths: it cannot be checked cell by cell (/each)")
    min_n = 1
    if min_n_part:
        if not min_n_part.startswith("n="):
            raise bad("expected @n=N")
        try:
            min_n = int(min_n_part[2:])
        except ValueError:
            raise bad("expected @n=N with a whole number") from None
    return Threshold(text.strip(), tuple(selector), kind, value, reading, each, max(1, min_n))


def _float(text: str, bad: Any) -> float:
    try:
        return float(text)
    except ValueError:
        raise bad(f"{text!r} is not a number") from None


def parse_alpha(text: str, *, flag: str = "--longctx-alpha") -> float:
    """The gate's false-alarm level: a number strictly between 0 and 0.5."""
    try:
        alpha = float(text)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a number (e.g. 0.05)") from None
    if not 0 < alpha < 0.5:
        raise UsageError(f"{flag}: {alpha} must be above 0 and below 0.5 (e.g. 0.05)")
    return alpha
