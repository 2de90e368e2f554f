"""Experiments' own graders, loaded by name: the server grades an experiment's prompts without knowing it.

An experiment declares ``"module:factory"`` names in its plugin's ``pytest_longctx_graders`` hook (see
``hookspecs.py``). The server runs apart from pytest, so :func:`discover` asks the installed plugins (the
``pytest11`` entry points) for them itself; the ``graded:`` spec may name more (``grader=module:factory``).
``factory()`` returns ``grade(prompt) -> dict | None`` (None: not this experiment's prompt); a factory that takes
one argument gets the spec's settings (``{"qa-key": "FILE", "seed": "1", ...}``), e.g. to read an answer key.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

Grade = Callable[[str], "Mapping[str, Any] | None"]
HOOK = "pytest_longctx_graders"


def discover() -> list[str]:
    """Every installed plugin's declared graders, in entry-point order (a plugin that fails to import adds none)."""
    names: list[str] = []
    for point in sorted(entry_points(group="pytest11"), key=lambda p: p.name):
        try:
            module = importlib.import_module(point.value.partition(":")[0])
        except Exception:  # noqa: S112 - a plugin that cannot load outside pytest declares no grader here
            continue
        hook = getattr(module, HOOK, None)
        if callable(hook):
            names += [str(n) for n in hook() or []]
    return names


def load(names: Iterable[str], settings: Mapping[str, str] | None = None) -> list[tuple[str, Grade]]:
    """``(name, grade)`` of each ``module:factory`` (given ``settings`` when it takes an argument); a bad name is a
    one-line ValueError."""
    out = []
    for name in dict.fromkeys(names):
        module, colon, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr) if colon and attr else None
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"graded: grader {name!r} cannot be loaded ({exc})") from None
        if not callable(factory):
            raise ValueError(f"graded: grader {name!r}: expected module:factory naming a function")
        takes = len(inspect.signature(factory).parameters) if callable(factory) else 0
        out.append((name, factory(dict(settings or {})) if takes else factory()))
    return out


def ask(graders: Sequence[tuple[str, Grade]], prompt: str) -> Mapping[str, Any] | None:
    """The first grader's reading of ``prompt`` that claims it (None: no experiment's grader does)."""
    from .graded_prompts import UnrecognisedPrompt

    for name, grade in graders:
        try:
            found = grade(prompt)
        except UnrecognisedPrompt:
            raise
        except ValueError as exc:  # a prompt of its own the grader cannot read
            raise UnrecognisedPrompt(str(exc)) from None
        if found is not None:
            missing = [k for k in ("experiment", "item", "right", "wrong") if not isinstance(found.get(k), str)]
            if missing:
                raise ValueError(f"graded: grader {name!r} returned no string {missing[0]!r}")
            return found
    return None
