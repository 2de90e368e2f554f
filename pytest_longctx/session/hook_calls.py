"""Calling the experiments' hooks (``hookspecs.py``) so that one failing experiment costs only its part.

Each implementation is called on its own: an exception becomes a note naming the plugin and hook,
and every other experiment's tables, sections and lines still reach the reports.
"""

from __future__ import annotations

from typing import Any

import pytest


def call_each(config: pytest.Config, name: str, notes: list[str], /, **kwargs: Any) -> list[Any]:
    """Results of every implementation of hook ``name`` (None results dropped), in pluggy's call order."""
    caller = getattr(config.hook, name)
    results: list[Any] = []
    for impl in reversed(caller.get_hookimpls()):  # pluggy calls the last registered first
        args = {arg: kwargs[arg] for arg in impl.argnames if arg in kwargs}
        try:
            result = impl.function(**args)
        except Exception as exc:  # a report part must never cost the run its reports
            notes.append(f"{name} of {impl.plugin_name} failed: {type(exc).__name__}: {exc}")
            continue
        if result is not None:
            results.append(result)
    return results


def flat(results: list[Any]) -> list[Any]:
    """``[[a, b], [c]]`` -> ``[a, b, c]`` (hooks returning lists)."""
    return [item for result in results for item in result]
