"""Each experiment's defaults for the run's model and protocol, and the one place a cell's trial count is decided.

Experiments declare their defaults through the ``pytest_longctx_defaults`` hook; the core's model profile names
no experiment. Trials per cell, in order: the count an experiment set for a test itself (``set_cell_samples``:
"every question", a source's fixed count, a cap by the items there are), else ``--longctx-samples``, else the
experiment's declared default for this model, else the core's default for the model (fake 40, local 1, remote 20).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

#: Experiment name -> its declared defaults, gathered once per process on first use.
DEFAULTS_KEY = pytest.StashKey[dict[str, "Defaults"]]()


@dataclass(frozen=True)
class Defaults:
    """One experiment's defaults for this run: trials per cell (None: the core's) and the conditions it picks."""

    experiment: str
    samples: int | None = None
    conditions: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "conditions": dict(self.conditions), "why": self.why}


def declared(config: pytest.Config) -> dict[str, Defaults]:
    """The experiments' defaults (a failing hook costs only its own defaults, and a note on the controller)."""
    if DEFAULTS_KEY not in config.stash:
        from pytest_longctx.session.hook_calls import call_each, flat

        notes: list[str] = []
        found = {d.experiment: d for d in flat(call_each(config, "pytest_longctx_defaults", notes, config=config))
                 if isinstance(d, Defaults)}
        config.stash[DEFAULTS_KEY] = found
        if notes and not hasattr(config, "workerinput"):
            from pytest_longctx.session.keys import RUN_KEY

            if RUN_KEY in config.stash:
                config.stash[RUN_KEY].notes.extend(notes)
    return config.stash[DEFAULTS_KEY]


def samples_for(config: pytest.Config, experiment: str) -> int:
    """Trials per cell of ``experiment`` unless a test sets its own: ``--longctx-samples`` when given, else the
    experiment's declared default for this model, else the core's."""
    from pytest_longctx.session.keys import SETTINGS_KEY

    settings = config.stash[SETTINGS_KEY]
    if settings.samples_given:
        return int(settings.samples)
    mine = declared(config).get(experiment)
    if mine is not None and mine.samples is not None:
        return mine.samples
    return int(settings.model.profile.default_samples)
