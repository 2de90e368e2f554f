"""The qa experiment's options: Federal Register issue dates, multiple-choice scoring, context sizes.

Registered by the experiment's plugin (``plugin.py``) in the ``longctx`` group, resolved once at
``pytest_configure`` (CLI > ini > default) after the core's settings, checked here (one-line errors).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from pytest_longctx import OptionDef, Settings, UsageError, offering, provider_of, whole_numbers
from pytest_longctx.util.blocks import design_help

FR_DATE = OptionDef("fr-date", "2024-02-12", "Federal Register issue date(s) for the qa experiment, comma-separated: "
                    "the first holds the questions, further issues add distractor sections (default: 2024-02-12)")
SCORING = OptionDef("scoring", None, "multiple choice: generate (read the answer letter) or logprob "
                    "(likelihood of each letter; local models) (default: logprob for local models, else generate; "
                    "the source protocol always generates)")
CONTEXT_SIZES = OptionDef("context-sizes", None, "qa context sizes in tokens, comma-separated, e.g. 70000,95000 "
                          "(default: the model profile's sizes, never more than the corpus fills)")
DESIGN = OptionDef("qa-design", None, design_help("which qa cells", "each question in a balanced subset of the "
                   "cells: three prompt variants at one size at every position, or two sizes at every depth; many "
                   "more questions for the same trials", "question"))
OPTIONS = (FR_DATE, SCORING, CONTEXT_SIZES, DESIGN)
DESIGNS = ("blocks", "full")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class QaOptions:
    """The qa experiment's resolved options."""

    fr_date: str = "2024-02-12"
    scoring: str = "generate"
    #: --longctx-context-sizes as given (empty: the experiment's defaults for the model)
    context_sizes: tuple[int, ...] = ()
    #: --longctx-qa-design resolved: blocks or full
    design: str = "full"

    def to_json(self) -> dict[str, Any]:
        return {"fr_date": self.fr_date, "scoring": self.scoring, "context_sizes": list(self.context_sizes),
                "design": self.design}


def check_fr_dates(text: str, flag: str = FR_DATE.flag) -> None:
    """``YYYY-MM-DD``, or a comma-separated list of such dates; each must be a real calendar date."""
    parts = [p.strip() for p in text.split(",")]
    for part in parts:
        if not _DATE.fullmatch(part):
            raise UsageError(f"{flag}: expected a date YYYY-MM-DD (or a comma-separated list of them), got {text!r}")
        try:
            dt.date.fromisoformat(part)
        except ValueError:
            raise UsageError(f"{flag}: {part!r} is not a calendar date (expected YYYY-MM-DD)") from None


def resolve(raw: dict[str, Any], settings: Settings) -> QaOptions:
    """The options from their raw values (noun -> value as given); UsageError (one line) on the first bad one."""
    fr_date = str(raw["fr-date"])
    check_fr_dates(fr_date)
    model = settings.model
    given = raw["scoring"]
    # likelihood scoring by default for a small model on the CPU, which rarely writes a well-formed answer
    scoring = str(given) if given is not None else (
        "logprob" if model.profile.runs == "cpu" and settings.protocol == "longctx" else "generate")
    if scoring not in ("generate", "logprob"):
        raise UsageError(f"{SCORING.flag}: expected generate or logprob, got {scoring!r}")
    if scoring == "logprob" and settings.protocol == "source":
        raise UsageError(f"{SCORING.flag}: logprob is not the source protocol's scoring; drop it or use "
                         f"--longctx-protocol longctx")
    if given is not None and scoring == "logprob" and not provider_of(model).logprob_scoring:
        raise UsageError(f"{SCORING.flag} logprob: likelihood scoring needs a {offering('logprob_scoring')} "
                         f"model, not {model.spec}; use {SCORING.flag} generate")
    return QaOptions(fr_date=fr_date, scoring=scoring,
                     context_sizes=whole_numbers(CONTEXT_SIZES, raw["context-sizes"], 256),
                     design=resolve_design(raw.get("qa-design"), settings))


def resolve_design(given: object, settings: Settings) -> str:
    """``--longctx-qa-design``: blocks by default for a remote model under the longctx protocol (not with
    ``--longctx-samples all``, the study's every question in every cell); the source protocol keeps the source's
    full-factorial design."""
    if given is None:
        remote = settings.model.profile.runs == "remote"
        return "blocks" if remote and settings.protocol == "longctx" and not settings.samples_all else "full"
    design = str(given).strip()
    if design not in DESIGNS:
        raise UsageError(f"{DESIGN.flag}: expected blocks or full, got {design!r}")
    if design == "blocks" and settings.protocol == "source":
        raise UsageError(f"{DESIGN.flag} blocks: the source protocol keeps the study's full-factorial design; drop "
                         f"it or use --longctx-protocol longctx")
    if design == "blocks" and settings.samples_all:
        raise UsageError(f"{DESIGN.flag} blocks: --longctx-samples all asks every question in every cell; drop one")
    return design

