"""Helpers an experiment (a test file, a ``conftest.py`` or a plugin) uses instead of the plugin's internals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings
    from pytest_longctx.session.option_def import OptionDef

T = TypeVar("T")


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
