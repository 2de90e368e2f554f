"""The run record's schema: its name and version, and the one place a record is read back and validated.

A record read here (``--longctx-compare``) has been checked field by field, so comparison and
gating code may index it without guarding every access: a truncated, hand-edited or foreign file
is a one-line :class:`UsageError` naming the file and the first thing wrong with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_longctx.errors import UsageError
from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.evidence import namespaced

SCHEMA = "pytest-longctx/run"
SCHEMA_VERSION = 3
#: Versions this plugin reads. Version 1 had no ``cluster`` on its trials: they load as one cluster each.
#: Version 2's clusters were not namespaced by experiment: they load under their experiment (``qa|q7``).
READABLE_VERSIONS = (1, 2, 3)
OUTCOMES = ("correct", "incorrect", "error")
_COUNTS = ("correct", "incorrect", "errors")

#: Required fields of a cell and a trial, with the check each value must pass and its description.
_CELL_FIELDS: tuple[tuple[str, str], ...] = (
    ("key", "str"), ("experiment", "str"), ("params", "dict"), ("n", "count"), ("accuracy", "rate"),
)
_CELL_OPTIONAL: tuple[tuple[str, str], ...] = (("correct", "count"), ("incorrect", "count"), ("errors", "count"))
_TRIAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("experiment", "str"), ("params", "dict"), ("sample", "count"), ("outcome", "outcome"),
)
_KIND_TEXT = {"str": "a string", "dict": "an object", "count": "a whole number >= 0",
              "rate": "a number between 0 and 1", "outcome": "one of " + ", ".join(OUTCOMES)}


def _ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict)
    if kind == "count":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "rate":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0
    return value in OUTCOMES


def _check_fields(where: str, obj: Any, required: tuple[tuple[str, str], ...],
                  optional: tuple[tuple[str, str], ...] = ()) -> str | None:
    if not isinstance(obj, dict):
        return f"{where} is {type(obj).__name__}, not an object"
    for name, kind in required:
        if name not in obj:
            return f"{where} has no {name!r}"
        if not _ok(kind, obj[name]):
            return f"{where}.{name} is {json.dumps(obj[name])[:40]}, not {_KIND_TEXT[kind]}"
    for name, kind in optional:
        if name in obj and not _ok(kind, obj[name]):
            return f"{where}.{name} is {json.dumps(obj[name])[:40]}, not {_KIND_TEXT[kind]}"
    return None


def record_problem(record: Any) -> str | None:
    """The first reason ``record`` is not a usable run record, or None when it is one."""
    if not isinstance(record, dict):
        return f"the file holds {type(record).__name__}, not a run record object"
    if record.get("schema") != SCHEMA:
        found = f"schema {record['schema']!r}" if "schema" in record else "no 'schema' field"
        return f"not a pytest-longctx run record ({found}; {SCHEMA!r} expected)"
    version = record.get("version")
    if version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1]) + f" and {READABLE_VERSIONS[-1]}"
        return f"run record version {version!r} is not supported (this plugin reads versions {readable})"
    if not isinstance(record.get("settings", {}), dict):
        return "'settings' is not an object"
    for name in ("cells", "trials"):
        if not isinstance(record.get(name), list):
            found = "missing" if name not in record else f"{json.dumps(record[name])[:40]}"
            return f"{name!r} is {found}, not a list"
    for i, cell in enumerate(record["cells"]):
        problem = _check_fields(f"cells[{i}]", cell, _CELL_FIELDS, _CELL_OPTIONAL)
        if problem:
            return problem
    for i, trial in enumerate(record["trials"]):
        problem = _check_fields(f"trials[{i}]", trial, _TRIAL_FIELDS)
        if problem:
            return problem
    return _duplicate(record["trials"]) or _miscounted(record)


def _duplicate(trials: list[dict[str, Any]]) -> str | None:
    """The first trial listed twice: the same test (its node id), cell and sample; a trial without a node id is
    the same when its cell, sample and item are."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, t in enumerate(trials):
        test = t.get("nodeid")
        key = (test, cell_key(t["experiment"], t["params"]), t["sample"], None if test else str(t.get("item")))
        if (first := seen.setdefault(key, i)) != i:
            return (f"trials[{i}] repeats trials[{first}] ({test or t['experiment']}, sample {t['sample']}): a record "
                    "lists each trial once, and a repeated one would count twice")
    return None


def _miscounted(record: dict[str, Any]) -> str | None:
    """The first cell whose counts disagree with its trials, or a trial in no cell (a rescued record, written
    when the run's finish failed, has trials and no cells: its trials are all it has)."""
    counted: dict[str, dict[str, int]] = {}
    for t in record["trials"]:
        outcome = "errors" if t["outcome"] == "error" else t["outcome"]
        tally = counted.setdefault(cell_key(t["experiment"], t["params"]), dict.fromkeys(_COUNTS, 0))
        tally[outcome] += 1
    cells = {cell_key(c["experiment"], c["params"]): (i, c) for i, c in enumerate(record["cells"])}
    for key, (i, cell) in cells.items():
        tally = counted.get(key, dict.fromkeys(_COUNTS, 0))
        said = {"n": cell["n"], **{k: cell[k] for k in _COUNTS if k in cell}}
        found = {"n": tally["correct"] + tally["incorrect"], **tally}
        wrong = [k for k, v in said.items() if v != found[k]]
        if wrong:
            k = wrong[0]
            return (f"cells[{i}] ({cell['experiment']}) says {k}={said[k]} but its trials give {found[k]}: the counts "
                    "disagree with the trials")
    if record["cells"] or not record.get("finish_error"):
        for key, tally in counted.items():
            if key not in cells:
                return (f"{sum(tally.values())} trials of {key} are in no cell of 'cells': the counts disagree with "
                        "the trials")
    return None


def load_record(path: Path, *, flag: str = "--longctx-compare") -> dict[str, Any]:
    """Read and validate a run record; anything else is a one-line UsageError naming ``flag`` and the file."""
    hint = "pass a longctx.json written by pytest-longctx"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{flag}: {path}: cannot read run record ({reason}); {hint}") from None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {path}: not JSON ({exc}); {hint}") from None
    problem = record_problem(record)
    if problem is not None:
        raise UsageError(f"{flag}: {path}: {problem}; {hint}")
    result: dict[str, Any] = record
    namespace = result["version"] < 3  # versions 1 and 2: clusters named without their experiment
    for trial in result["trials"]:  # version 1: no clusters; each trial counts alone
        trial.setdefault("cluster", f"trial:{trial.get('nodeid') or trial['experiment']}#{trial['sample']}")
        if namespace:
            trial["cluster"] = namespaced(str(trial["experiment"]), str(trial["cluster"]))
    return result

