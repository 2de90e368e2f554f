"""One command-line and ini option of the plugin or an experiment: its noun, default, help and kind."""

from __future__ import annotations

from dataclasses import dataclass


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
