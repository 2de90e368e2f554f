"""A trial's identity (experiment, condition params, sample index), computed in one place.

The ``longctx`` fixture, setup-error records, crash records and the controller's cell list all take
the identity from :func:`trial_identity`, so every record of one test lands in the same cell.

Crashed workers: xdist's controller does not collect, so it cannot compute a crashed test's identity
itself. Each worker therefore attaches the identity to the test's *setup* report (user property
:data:`IDENTITY_KEY`), which reaches the controller before the test body runs; when a worker dies
during the call the controller builds the error record from it (see :mod:`pytest_longctx.session.crash`).
Parsing the nodeid's parametrization id instead was rejected: ids need not map back to values.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_longctx.session.trial import plain

#: The parametrized argument that numbers trials within a cell.
SAMPLE_ARG = "longctx_sample"
#: The parametrized argument naming a trial's model when several run (``session/model_axis.py``); not a condition.
MODEL_ARG = "longctx_model"
#: User property on a setup report carrying the trial's identity (for the controller, in case the worker dies).
IDENTITY_KEY = "longctx_identity"
_SAMPLE_ID = re.compile(r"(?:^|-)s(\d+)$")


def experiment_name(item: pytest.Item) -> str:
    """The marker's experiment name, else the test function's name without ``test_``."""
    marker = item.get_closest_marker("longctx")
    if marker is not None and marker.args:
        return str(marker.args[0])
    return str(getattr(item, "originalname", item.name)).removeprefix("test_")


def condition_params(item: pytest.Item) -> dict[str, Any]:
    """The item's parametrization minus the sample index and names the marker excludes."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    marker = item.get_closest_marker("longctx")
    exclude = set(marker.kwargs.get("exclude", ())) if marker else set()
    return {k: plain(v) for k, v in sorted(callspec.params.items())
            if k not in (SAMPLE_ARG, MODEL_ARG) and k not in exclude}


def trial_model(item: pytest.Item) -> str | None:
    """The model a trial asks when several models run (its :data:`MODEL_ARG`), else None (the one model)."""
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get(MODEL_ARG) if callspec is not None else None
    return None if value is None else str(value)


def trial_identity(item: pytest.Item) -> dict[str, Any]:
    """``{"experiment", "params", "sample"}`` of the trial ``item`` runs (plain types, sendable by execnet)."""
    callspec = getattr(item, "callspec", None)
    sample = int(callspec.params.get(SAMPLE_ARG, 0)) if callspec is not None else 0
    identity = {"experiment": experiment_name(item), "params": condition_params(item), "sample": sample}
    model = trial_model(item)
    return identity if model is None else {**identity, "model": model}


def split_nodeid(nodeid: str) -> tuple[str, str, int]:
    """``(function nodeid, parametrization id without the sample part, sample index)`` of a nodeid.

    Trials of one cell share the first two, so a crashed trial's cell can be found from a sibling's.
    """
    func, _, ids = nodeid.partition("[")
    ids = ids.removesuffix("]")
    found = _SAMPLE_ID.search(ids)
    sample = int(found.group(1)) if found else 0
    return func, ids[: found.start()] if found else ids, sample


def error_record(nodeid: str, identity: dict[str, Any], error: str, *, fatal: bool,
                 seed: int | None = None) -> dict[str, Any]:
    """The trial record of an infrastructure error (setup failure, crashed worker): never a wrong answer."""
    return {
        "nodeid": nodeid, "experiment": identity["experiment"], "params": identity["params"],
        "sample": identity["sample"], "seed": seed,
        "outcome": "error", "item": None, "expected": None, "answer": None, "raw": "", "reason": None,
        "error": error.split("\n")[0][:1000], "fatal": fatal,
        "calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0, "paid_input_tokens": 0,
        "paid_output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "latency_s": 0.0,
        "detail": {},
        **({"model": identity["model"]} if identity.get("model") else {}),
    }
