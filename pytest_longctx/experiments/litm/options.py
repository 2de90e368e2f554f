"""Lost in the middle's options: numbers of documents and keys, positions, baselines, design (CLI
``--longctx-<noun>``, ini ``longctx_<noun>``; no defaults here: the plan decides per window)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_longctx import OptionDef, Settings
from pytest_longctx.experiments.litm.plan import LitmOptions, parse_options, resolve_design
from pytest_longctx.util.blocks import design_help

DOCUMENTS = OptionDef("litm-documents", None, "Lost in the middle: numbers of documents, e.g. 10,20,30 "
                      "(default: 10 for windows under 16K tokens, else 10,20,30)")
KEYS = OptionDef("litm-keys", None, "Lost in the middle: numbers of key-value pairs, 75 and/or 140 "
                 "(default: 75 for windows under 16K tokens, else 75,140)")
POSITIONS = OptionDef("litm-positions", None, "Lost in the middle: positions of the relevant document/key: paper, "
                      "all, or 0-based indices like 0,4,9 (default: paper)")
BASELINES = OptionDef("litm-baselines", None, "Lost in the middle: also run closed-book and oracle QA cells "
                      "(default: true)", bare="true", negated="false")
DESIGN = OptionDef("litm-design", None, design_help("Lost in the middle: which QA cells", "each question at one "
                   "number of documents, at every gold position; three times the questions for the same trials",
                   "question"))
OPTIONS = (DOCUMENTS, KEYS, POSITIONS, BASELINES, DESIGN)


def resolve(raw: dict[str, Any], settings: Settings) -> LitmOptions:
    """The options from their values as given (kept for the record); a bad one is a one-line UsageError."""
    design = resolve_design(raw[DESIGN.noun], remote=settings.model.profile.runs == "remote",
                            protocol=settings.protocol, samples_all=settings.samples_all)
    options = parse_options(raw[DOCUMENTS.noun], raw[KEYS.noun], raw[POSITIONS.noun], raw[BASELINES.noun],
                            design=design)
    return dataclasses.replace(options, given=tuple((o.noun, raw[o.noun]) for o in OPTIONS))
