"""An experiment whose data is not on this machine is skipped at collection, with one line saying what to do.

The run never downloads (``longctx-data fetch`` does, ahead of time): an experiment's
``pytest_generate_tests`` catches :class:`~pytest_longctx.corpus.lookup.CorpusNotFound` and raises
:func:`data_missing`'s :class:`DataMissing`. pytest then skips the test module at collection (every xdist
worker the same way); the core gathers the line on the controller, prints it once in the summary and keeps
it in the run record, and the rest of the run goes on. Only for experiments the run selected: a module that
``-k``/``-m`` deselects as a whole (``-k lrt``) says nothing about its missing data (:func:`is_selected`).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pytest_longctx.corpus.lookup import DATA_DIR_ENV, CorpusFile
from pytest_longctx.util.commands import script_command

#: The console script that fetches corpora (``pytest_longctx.corpus.fetch``), and its ``python -m`` twin.
FETCH_SCRIPT = "longctx-data"
FETCH_MODULE = "pytest_longctx.corpus"


class DataMissing(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """Skips the experiments in ``experiments``: ``missing`` (what is not here), ``provide`` (how to get it)."""

    def __init__(self, experiments: Sequence[str], missing: str, provide: str) -> None:
        self.experiments = tuple(experiments)
        self.missing = missing
        self.provide = provide
        super().__init__(self.line, allow_module_level=True)

    @property
    def line(self) -> str:
        """The one line a user reads: which experiments did not run, what is missing, how to provide it."""
        return missing_line(self.experiments, self.missing, self.provide)

    def to_json(self) -> dict[str, Any]:
        """Plain data (it travels on a collect report from an xdist worker to the controller)."""
        return {"experiments": list(self.experiments), "missing": self.missing, "provide": self.provide,
                "line": self.line}


def missing_line(experiments: Sequence[str], missing: str, provide: str) -> str:
    """``qa, qa-control not run: <what> not found; get it with `<command>`, ...``."""
    return f"{', '.join(experiments)} not run: {missing}; {provide}"


def merge_missing(entries: list[dict[str, Any]], payload: dict[str, Any]) -> None:
    """Add a :meth:`DataMissing.to_json` payload to ``entries``: the same missing data (and remedy) is one entry
    naming every experiment it keeps from running (qa's two modules report it, and so does every xdist worker)."""
    for entry in entries:
        if (entry["missing"], entry["provide"]) == (payload["missing"], payload["provide"]):
            entry["experiments"] = list(dict.fromkeys([*entry["experiments"], *payload["experiments"]]))
            entry["line"] = missing_line(entry["experiments"], entry["missing"], entry["provide"])
            return
    entries.append({k: payload[k] for k in ("experiments", "missing", "provide", "line")})


def fetch_command(name: str) -> str:
    """``.venv/bin/longctx-data fetch NAME``, as this installation runs it."""
    return f"{script_command(FETCH_SCRIPT, FETCH_MODULE)} fetch {name}"


def data_missing(experiments: Sequence[str], files: Sequence[CorpusFile], fetch: str,
                 looked: Sequence[str] = ()) -> DataMissing:
    """The skip of ``experiments`` whose ``files`` were not found; ``fetch`` names them for ``longctx-data fetch``;
    ``looked``: every place they were looked for (``CorpusNotFound.looked``), said in the line."""
    what = ", ".join(f.where if f.file in f.title else f"{f.title} ({f.where})" for f in files)
    it = "it" if len(files) == 1 else "them"
    where = f" in {', '.join(looked[:-1])} or {looked[-1]}" if len(looked) > 1 else "".join(f" in {w}" for w in looked)
    return DataMissing(experiments, f"{what} not found{where}",
                       f"get {it} with `{fetch_command(fetch)}`, or set {DATA_DIR_ENV} to a folder of corpora "
                       f"holding {it}")


def is_selected(collector: pytest.Collector, experiments: Sequence[str]) -> bool:
    """Whether the ``-k`` and ``-m`` expressions of the run can select a test of ``collector`` (a module skipped
    at collection for want of data, so its items and their parameter ids never existed).

    ``-k`` is matched, as pytest matches it, against the names of the module and its parents, of its test
    functions and of ``experiments``; ``-m`` against the markers of the module and of its test functions.
    Anything this cannot decide counts as selected (the line is then printed, as before).
    """
    try:
        from _pytest.mark import KeywordMatcher, MarkMatcher
        from _pytest.mark.expression import Expression
    except ImportError:  # pytest moved them: say it rather than hide it
        return True
    config = collector.config
    marks = [*collector.iter_markers(), *(m for _, fn in _test_functions(collector) for m in _marks_of(fn))]
    names = {node.name for node in collector.listchain()[1:]} | set(experiments)
    names |= {name for name, _ in _test_functions(collector)} | {m.name for m in marks}
    try:
        for expr, matcher in ((config.option.keyword, KeywordMatcher(names)),
                              (config.option.markexpr, MarkMatcher.from_markers(marks))):
            if expr and expr.strip() and not Expression.compile(expr.strip()).evaluate(matcher):
                return False
    except Exception:  # a bad expression is pytest's to report
        return True
    return True


def _test_functions(collector: pytest.Collector) -> Iterator[tuple[str, Any]]:
    """(name, function) of the module's test functions (and test methods of its test classes)."""
    obj = getattr(collector, "obj", None)
    for name, value in sorted(vars(obj).items()) if obj is not None else ():
        if name.startswith("test") and inspect.isfunction(value):
            yield name, value
        elif name.startswith("Test") and inspect.isclass(value):
            for method, fn in sorted(vars(value).items()):
                if method.startswith("test") and inspect.isfunction(fn):
                    yield method, fn


def _marks_of(function: Any) -> list[Any]:
    marks = getattr(function, "pytestmark", [])
    return list(marks) if isinstance(marks, (list, tuple)) else [marks]
