"""One command-line and ini option of the plugin or an experiment: its noun, default, help and kind, and the
parsers of its values (each a one-line :class:`UsageError` naming the option on a bad value).

Every option lives in the ``longctx`` group (:data:`GROUP`), as ``--longctx-<noun>`` on the command line and
``longctx_<noun>`` in the ini file.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_longctx.errors import UsageError

#: The option group every option of the plugin and its experiments is registered in.
GROUP = "longctx"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "none")
#: The words a bare switch takes as its value when they follow it (``--longctx-plan false``; ``auto`` for switches
#: such as --longctx-docs-judge); any other word after it (a path) is not its value.
SWITCH_WORDS = (*TRUE_WORDS, *FALSE_WORDS, "auto")


@dataclass(frozen=True)
class OptionDef:
    """One option: its noun, default, help text, whether it is a list, and whether it is a switch."""

    noun: str
    default: str | None
    help: str
    is_list: bool = False
    #: A switch: the value of the bare flag (``--longctx-plan`` is ``--longctx-plan=true``); None: takes a value.
    bare: str | None = None
    #: The value of its ``--no-longctx-<noun>`` form (switches on by default); None: no such form.
    negated: str | None = None

    @property
    def dest(self) -> str:
        return "longctx_" + self.noun.replace("-", "_")

    @property
    def flag(self) -> str:
        return "--longctx-" + self.noun

    @property
    def negated_flag(self) -> str:
        return "--no-longctx-" + self.noun


def parse_int(opt: OptionDef, value: str | None, low: int) -> int:
    """``value`` as a whole number >= ``low``."""
    try:
        number = int(str(value))
    except ValueError:
        raise UsageError(f"{opt.flag}: expected a whole number, got {value!r}") from None
    if number < low:
        raise UsageError(f"{opt.flag}: must be >= {low}, got {number}")
    return number


def parse_ints(opt: OptionDef, value: str | None, low: int) -> tuple[int, ...]:
    """A comma-separated list of whole numbers >= low, sorted and without duplicates (empty: none given)."""
    if value is None or not str(value).strip():
        return ()
    parts = [p.strip().replace("_", "") for p in str(value).split(",") if p.strip()]
    return tuple(sorted({parse_int(opt, p, low) for p in parts}))


def parse_bool(opt: OptionDef, value: str | None) -> bool:
    """One of :data:`TRUE_WORDS` or :data:`FALSE_WORDS` (or nothing: false) as a bool."""
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in (*FALSE_WORDS, ""):
        return False
    raise UsageError(f"{opt.flag}: expected true or false, got {value!r}")
