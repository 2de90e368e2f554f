"""Helpers an experiment (a test file, a ``conftest.py`` or a plugin) uses instead of the plugin's internals."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings
    from pytest_longctx.session.defaults import Defaults
    from pytest_longctx.session.option_def import OptionDef

T = TypeVar("T")
R = TypeVar("R")
Rows = Sequence[Mapping[str, Any]]


def settings(config: pytest.Config) -> Settings:
    """The run's resolved settings (model, seed, samples, data dir, cache dir, protocol, ...), read-only.

    Available from ``pytest_configure`` on (the plugin resolves them first), on the controller and on
    every xdist worker alike.
    """
    from pytest_longctx.session.keys import SETTINGS_KEY

    return config.stash[SETTINGS_KEY]


def active(config: pytest.Config) -> bool:
    """Whether the plugin runs in this session (``-p no:longctx`` turns it off; experiments then stay quiet)."""
    from pytest_longctx.session.keys import SETTINGS_KEY

    return SETTINGS_KEY in config.stash


def set_cell_samples(metafunc: pytest.Metafunc, count: int) -> None:
    """In ``pytest_generate_tests``: this test's cells have ``count`` trials each, instead of --longctx-samples.

    For an experiment whose source fixes its own count (e.g. 50 per cell) or that means "every item" by
    ``--longctx-samples all``. Call it before the plugin parametrizes the sample index (any
    ``pytest_generate_tests`` in a test module or ``conftest.py`` runs first).
    """
    from pytest_longctx.session.keys import CELL_SAMPLES_KEY

    if count < 1:
        raise ValueError(f"set_cell_samples: count must be at least 1, got {count}")
    metafunc.definition.stash[CELL_SAMPLES_KEY] = count


def add_options(parser: pytest.Parser, options: Sequence[OptionDef]) -> None:
    """In ``pytest_addoption``: register an experiment's options in the ``longctx`` group.

    Each is ``--longctx-<noun>`` on the command line and ``longctx_<noun>`` in the ini file.
    """
    from pytest_longctx.session.option_group import register

    register(parser, tuple(options))


def option_value(config: pytest.Config, option: OptionDef) -> str | list[str] | None:
    """An experiment option as given: command line, else ini file, else its default (validate it yourself)."""
    from pytest_longctx.session.option_group import raw_value

    return raw_value(config, option)


def resolve_options(config: pytest.Config, options: Sequence[OptionDef],
                    resolve: Callable[[dict[str, Any]], T]) -> T:
    """In ``pytest_configure``: ``resolve`` the options as given (noun -> value, see :func:`option_value`).

    A :class:`UsageError` it raises becomes pytest's one-line usage error (exit 4), as for the core's options.
    """
    from pytest_longctx.errors import UsageError

    try:
        return resolve({o.noun: option_value(config, o) for o in options})
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def whole_number(option: OptionDef, value: str | None, low: int) -> int:
    """``value`` as a whole number >= ``low``; a one-line :class:`UsageError` naming the option otherwise."""
    from pytest_longctx.session.option_def import parse_int

    return parse_int(option, value, low)


def whole_numbers(option: OptionDef, value: str | None, low: int) -> tuple[int, ...]:
    """A comma-separated list of whole numbers >= ``low``, sorted, without duplicates (empty when not given)."""
    from pytest_longctx.session.option_def import parse_ints

    return parse_ints(option, value, low)


def true_or_false(option: OptionDef, value: str | None) -> bool:
    """``true/false/yes/no/on/off/1/0`` as a bool; a one-line :class:`UsageError` naming the option otherwise."""
    from pytest_longctx.session.option_def import parse_bool

    return parse_bool(option, value)


class Experiment(Generic[T]):
    """An experiment declared once: its name, its options and how they resolve, what the run record's settings
    keep of them, and its defaults for the run's model.

    The declaration is a pytest plugin object (as pytest-xdist's ``DSession``), registered by one line of your
    plugin module or ``conftest.py``: ``pytest_addhooks = PASSKEY.register``. It registers the options
    (``--longctx-<noun>``, ini ``longctx_<noun>``), resolves them once at ``pytest_configure`` after the core's
    settings (``resolve(raw, settings)``, ``raw`` mapping each noun to its value as given: command line, else ini,
    else the default; a :class:`UsageError` it raises is pytest's one-line usage error, exit 4), and answers
    ``pytest_longctx_record_settings`` (``record(options, settings)``, by default ``options.to_json()``) and
    ``pytest_longctx_defaults`` (``defaults(options, settings)``). Read the resolved options with :meth:`options`.
    Your experiment's other hooks (tables, report sections, chance, graders...) stay functions of your plugin;
    :meth:`own` hands one only your experiments' rows.

    Args:
        name: the experiment's name (and its plugin's: ``longctx-experiment-<name>``).
        options: its option definitions (:class:`OptionDef`).
        resolve: ``(raw, settings) -> options``; without it the options are ``raw`` itself.
        record: ``(options, settings) -> dict`` merged into the record's settings (default: ``options.to_json()``,
            or the raw options by noun with ``_`` for ``-``).
        defaults: ``(options, settings) -> [Defaults, ...]`` for the run's model and protocol.
        experiments: the experiment names its trials carry, for :meth:`own` (default: ``name`` alone).
    """

    def __init__(self, name: str, options: Sequence[OptionDef] = (),
                 resolve: Callable[[dict[str, Any], Settings], T] | None = None, *,
                 record: Callable[[T, Settings], dict[str, Any]] | None = None,
                 defaults: Callable[[T, Settings], Sequence[Defaults]] | None = None,
                 experiments: Sequence[str] = ()) -> None:
        self.name = name
        self.option_defs = tuple(options)
        self.experiments = tuple(experiments) or (name,)
        self._resolve = resolve
        self._record = record
        self._defaults = defaults
        self._key = pytest.StashKey[T]()

    def __repr__(self) -> str:
        return f"Experiment({self.name!r})"

    def register(self, pluginmanager: pytest.PytestPluginManager) -> None:
        """Your module's ``pytest_addhooks`` (``pytest_addhooks = PASSKEY.register``, or call it from yours): add the
        plugin's hook specifications and this declaration's hooks (``pytest_addoption`` and ``pytest_configure``
        are replayed for it: pytest keeps their history)."""
        from pytest_longctx.hookspecs import register

        register(pluginmanager)
        pluginmanager.register(self, f"longctx-experiment-{self.name}")

    def options(self, config: pytest.Config) -> T:
        """The run's resolved options (from ``pytest_configure`` on, on the controller and every worker); resolved
        on first use, so also a ``pytest_configure`` that pluggy calls before this declaration's can read them."""
        if self._key not in config.stash:
            config.stash[self._key] = resolve_options(config, self.option_defs,
                                                      lambda raw: self._resolved(raw, config))
        return config.stash[self._key]

    def _resolved(self, raw: dict[str, Any], config: pytest.Config) -> T:
        return self._resolve(raw, settings(config)) if self._resolve else cast(T, raw)

    def own(self, hook: Callable[[list[Mapping[str, Any]], list[Mapping[str, Any]]], R],
            ) -> Callable[[Rows, Rows], R | None]:
        """Decorate a ``(cells, trials)`` hook (tables, report sections, chance): it gets only the rows of this
        declaration's experiments, and is not called when none of their cells ran (no contribution)."""
        names = self.experiments

        @functools.wraps(hook)
        def mine(cells: Rows, trials: Rows) -> R | None:
            own_cells = [c for c in cells if c.get("experiment") in names]
            if not own_cells:
                return None
            return hook(own_cells, [t for t in trials if t.get("experiment") in names])

        return mine

    def pytest_addoption(self, parser: pytest.Parser) -> None:
        add_options(parser, self.option_defs)

    def pytest_configure(self, config: pytest.Config) -> None:
        """Resolve the options once, after the core's settings (not under ``-p no:longctx``)."""
        if active(config):
            self.options(config)

    def pytest_longctx_record_settings(self, config: pytest.Config) -> dict[str, Any]:
        options = self.options(config)
        if self._record is not None:
            return self._record(options, settings(config))
        if isinstance(options, Mapping):  # no resolve: the options as given, by noun
            return {noun.replace("-", "_"): value for noun, value in options.items()}
        to_json = getattr(options, "to_json", None)
        return dict(to_json()) if to_json is not None else {}

    def pytest_longctx_defaults(self, config: pytest.Config) -> list[Defaults]:
        return list(self._defaults(self.options(config), settings(config))) if self._defaults else []
