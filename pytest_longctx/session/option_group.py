"""The ``longctx`` option group on pytest's command line and in the ini file: registering options, bare switches,
reading a value as given.

A switch (``OptionDef.bare``) works like pytest's own flags: ``--longctx-plan`` alone, anywhere on the command
line, means ``--longctx-plan=true``; ``--longctx-plan=false`` and ``--longctx-plan false`` still work (the word
after a bare switch is its value only when it is one of :data:`SWITCH_WORDS`, so ``pytest --longctx-plan evals``
plans ``evals``); switches that are on by default also have a ``--no-longctx-<noun>`` form.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.session.option_def import GROUP, SWITCH_WORDS, OptionDef


def register(parser: pytest.Parser, options: tuple[OptionDef, ...]) -> None:
    """Register ``options`` (the core's or an experiment's) in the ``longctx`` option group, with their ini twins.

    A switch takes an optional value (``nargs="?"``, ``const`` its bare value); :func:`settle_switches` makes
    sure the word after a bare one is taken as its value only when it is one of :data:`SWITCH_WORDS`.
    """
    group = parser.getgroup(GROUP, "pytest-longctx: long-context LLM evaluation")
    for opt in options:
        text = opt.help.replace("%(default)s", str(opt.default))
        metavar = opt.noun.upper().replace("-", "_")
        if opt.bare is not None:
            group.addoption(opt.flag, action="store", nargs="?", const=opt.bare, dest=opt.dest, default=None,
                            metavar=metavar, help=text)
            if opt.negated is not None:
                group.addoption(opt.negated_flag, action="store_const", const=opt.negated, dest=opt.dest,
                                default=None, help=f"the same as {opt.flag}={opt.negated}")
        else:
            group.addoption(opt.flag, action="append" if opt.is_list else "store", dest=opt.dest, default=None,
                            metavar=metavar, help=text)
        ini_type: Literal["linelist", "string"] = "linelist" if opt.is_list else "string"
        parser.addini(opt.dest, help=text, type=ini_type, default=[] if opt.is_list else None)


def switches(parser: pytest.Parser) -> dict[str, tuple[str, str]]:
    """The switches registered in the ``longctx`` group (the core's and every experiment's): flag -> (dest,
    bare value)."""
    found = {}
    for option in parser.getgroup(GROUP).options:
        attrs = option.attrs()
        if attrs.get("nargs") == "?" and isinstance(attrs.get("const"), str):
            found.update({name: (str(attrs["dest"]), str(attrs["const"])) for name in option.names()})
    return found


def normalize_switches(args: Sequence[str], bare: Mapping[str, str], here: Path | None = None) -> list[str]:
    """``args`` with every bare switch given its value explicitly: ``--longctx-plan evals`` becomes
    ``--longctx-plan=true evals``, ``--longctx-plan false`` becomes ``--longctx-plan=false`` (``bare``: flag ->
    the value of the bare flag). Nothing after ``--`` is touched.

    With ``here`` (the folder pytest resolves paths from), a word after a bare switch that is neither one of
    :data:`SWITCH_WORDS`, nor an option, nor an existing file or folder (``--longctx-plan maybe``) is a
    :class:`UsageError` naming the switch, instead of a test path pytest reports missing after the run.
    """
    out: list[str] = []
    pyargs = "--pyargs" in args  # then a word may name a package, not a path
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg in bare:
            follows = args[i + 1] if i + 1 < len(args) else None
            taken = follows is not None and follows.strip().lower() in SWITCH_WORDS
            if follows is not None and not taken and here is not None and not pyargs:
                _check_path_after(arg, follows, here)
            out.append(f"{arg}={follows if taken else bare[arg]}")
            i += 2 if taken else 1
            continue
        out.append(arg)
        i += 1
    return out


def _check_path_after(flag: str, word: str, here: Path) -> None:
    """``word`` follows the bare switch ``flag`` and is not its value: it must be an option or a test path."""
    if word.startswith("-") or (here / word.split("::")[0]).exists():
        return
    raise UsageError(f"{flag}: {word!r} is neither a value of it (such as true or false) nor a file or folder; "
                     f"write {flag}=VALUE, or pass a path that exists")


def settle_switches(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``pytest_load_initial_conftests``: rewrite ``args`` in place with :func:`normalize_switches`, before pytest
    parses them for good; the early parse (already done, which took a path after a bare switch for its value) is
    redone for the paths and the switches, so the initial conftests are looked up where the user pointed."""
    found = switches(parser)
    try:
        settled = normalize_switches(args, {flag: value for flag, (_, value) in found.items()},
                                     Path(early_config.invocation_params.dir))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settled == list(args):
        return
    args[:] = settled
    fresh = parser.parse_known_args(args, namespace=copy.copy(early_config.option))
    known = early_config.known_args_namespace
    for dest in {"file_or_dir", *(dest for dest, _ in found.values())}:
        setattr(known, dest, getattr(fresh, dest))


def raw_value(config: pytest.Config, opt: OptionDef) -> str | list[str] | None:
    """The option's value as given: command line, else ini file, else its default (not validated)."""
    cli = config.getoption(opt.dest)
    if cli is not None:
        return list(cli) if opt.is_list else str(cli)
    ini = config.getini(opt.dest)
    if opt.is_list:
        return list(ini or [])
    return str(ini) if ini not in (None, "") else opt.default
