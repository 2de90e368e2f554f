"""The tiers of the plugin's own tests, as Hypothesis keeps cover/nocover/quality (docs/development.md).

``pytest tests -n 2`` (the README's command) runs the fast tier: every test not marked ``e2e``. ``-m e2e`` runs the
end-to-end tier, which ``.ci/run`` runs after it; any other ``-m`` expression, or naming single tests by node id,
selects as pytest always does. Besides the tests marked by hand, a case that hands ``-n`` to its inner run and a
test that reads a full corpus through a fixture are e2e by their arguments.
"""

from __future__ import annotations

import pytest

#: The marker of the end-to-end tier: ``-n 2`` inner runs, subprocesses of the real commands, a fresh clone, README
#: commands, the browser, the full corpora. The README's ``pytest tests -n 2`` leaves these out; ``-m e2e`` runs them.
E2E = "e2e"
#: The README recipe as written over the whole default design (``tests/test_sequential_recipe.py``, 45 min or more):
#: left out of both tiers; ``-m recipe`` runs it.
RECIPE = "recipe"
#: The fixtures that read a full corpus (tests/corpus_data.py): a test using one belongs to the e2e tier.
CORPUS_FIXTURES = frozenset({"fr_xml", "fr_data_dir"})


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark e2e what is e2e by its arguments: a case handing ``-n`` to its inner run, a test reading a full corpus."""
    if _runs_xdist(item) or CORPUS_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(E2E)


@pytest.hookimpl(trylast=True)  # after syrupy has seen every collected test, so it knows which snapshots go unused
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Unless the command line chose a selection (``-m``, or single tests by node id), leave the e2e tier out."""
    if config.option.markexpr or _named_tests(config):
        return
    left_out = [item for item in items if item.get_closest_marker(E2E) or item.get_closest_marker(RECIPE)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        dropped = {id(item) for item in left_out}
        items[:] = [item for item in items if id(item) not in dropped]


def _runs_xdist(item: pytest.Item) -> bool:
    """Whether a parametrized case hands ``-n`` to its inner run (the ``n0``/``n2`` modes and their like)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(isinstance(value, list | tuple) and any(isinstance(arg, str) and (arg == "-n" or arg.startswith("-n "))
                                                       for arg in value)
               for value in callspec.params.values())


def _named_tests(config: pytest.Config) -> bool:
    """Whether the command line names single tests (``file.py::test``): those run whatever their tier."""
    return any("::" in str(arg) for arg in config.args)
