"""The docs experiment's options: the documents folder, review policy, scorer, judge, context budget.

Registered by the experiment's plugin (``plugin.py``) in the ``longctx`` group, resolved once at
``pytest_configure`` (CLI > ini > default) after the core's settings, checked here (one-line errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_longctx import OptionDef, Settings, UsageError, true_or_false, whole_number
from pytest_longctx.util.blocks import design_help

DOCS = OptionDef("docs", None, "folder of your own documents for the docs experiment (default: fixtures/docs)")
REVIEW = OptionDef("docs-review", "required", "which QA items of the docs folder are used: required (approved only) "
                   "or optional (approved and pending) (default: required)")
SCORER = OptionDef("docs-scorer", "subspan", "primary scorer of the docs experiment: subspan, em, f1 or judge "
                   "(default: subspan)")
JUDGE = OptionDef("docs-judge", "auto", "also grade every docs answer with the judge model: true, false, or auto "
                  "(true unless the judge is a local CPU model, which cannot judge) (default: auto)", bare="true",
                  negated="false")
CONTEXT = OptionDef("docs-context", None, "largest context the docs experiment builds, in tokens (default: the "
                    "model's window minus 512 for question and answer, at most 1024 for local models)")
DESIGN = OptionDef("docs-design", None, design_help("which docs size cells", "every item at every depth, and at a "
                   "balanced subset of the context sizes in both arms, each size keeping at least 50 items; fewer "
                   "requests for nearly the same power", "item"))
RETRIEVER = OptionDef("docs-retriever", None, "retriever of the docs RAG arm: bm25 (bm25s), dense (wordllama's "
                      "bundled embeddings), hybrid (the two fused by reciprocal rank), or a name your "
                      "pytest_longctx_retriever hook answers (default: hybrid; dense under --longctx-protocol source, "
                      "as the write-up's vector store)")
OPTIONS = (DOCS, REVIEW, SCORER, JUDGE, CONTEXT, DESIGN, RETRIEVER)


@dataclass(frozen=True)
class DocsOptions:
    """The docs experiment's resolved options."""

    folder: Path | None = None
    review: str = "required"
    scorer: str = "subspan"
    judge: bool = True
    context: int = 0
    #: --longctx-docs-design resolved: blocks (:mod:`.design`) or full
    design: str = "full"
    #: --longctx-docs-retriever: bm25, dense, hybrid or a name a pytest_longctx_retriever hook answers
    retriever: str = "hybrid"

    def folder_or_default(self, settings: Settings) -> Path:
        """--longctx-docs, else the project's ``fixtures/docs``."""
        return self.folder or settings.rootdir / "fixtures" / "docs"

    def to_json(self) -> dict[str, Any]:
        return {"docs": str(self.folder) if self.folder else None, "docs_review": self.review,
                "docs_scorer": self.scorer, "docs_judge": self.judge, "docs_context": self.context,
                "docs_design": self.design, "docs_retriever": self.retriever}


def resolve(raw: dict[str, Any], settings: Settings) -> DocsOptions:
    """The options from their raw values (noun -> value as given); UsageError (one line) on the first bad one."""
    folder = Path(str(raw["docs"])) if raw["docs"] else None
    if folder is not None and not folder.is_absolute():
        folder = settings.rootdir / folder
    if folder is not None and not folder.is_dir():
        raise UsageError(f"{DOCS.flag}: {folder} is not a folder; point it at a folder of .txt/.md documents")
    review, scorer = str(raw["docs-review"]), str(raw["docs-scorer"])
    if review not in ("required", "optional"):
        raise UsageError(f"{REVIEW.flag}: expected required or optional, got {review!r}")
    if scorer not in ("subspan", "em", "f1", "judge"):
        raise UsageError(f"{SCORER.flag}: expected subspan, em, f1 or judge, got {scorer!r}")
    judge = (settings.judge.profile.runs != "cpu" if str(raw["docs-judge"]) == "auto"  # a 135M model is no judge
             else true_or_false(JUDGE, str(raw["docs-judge"])))
    if scorer == "judge" and not judge:
        raise UsageError(f"{SCORER.flag}: judge needs {JUDGE.flag} true")
    window = settings.context_window
    context = (whole_number(CONTEXT, str(raw["docs-context"]), 128) if raw["docs-context"] is not None
               else min(max(window - 512, window // 2), 1024 if settings.model.profile.runs == "cpu" else window))
    return DocsOptions(folder=folder, review=review, scorer=scorer, judge=judge, context=context,
                       design=resolve_design(raw.get("docs-design"), settings),
                       retriever=str(raw.get("docs-retriever") or ("dense" if settings.protocol == "source"
                                                                   else "hybrid")).strip())


def resolve_design(given: object, settings: Settings) -> str:
    """``--longctx-docs-design`` (:func:`~pytest_longctx.util.blocks.resolve_design`): the source protocol keeps the
    write-up's full design."""
    from pytest_longctx.util.blocks import resolve_design as resolve

    return resolve(DESIGN.flag, given, remote=settings.model.profile.runs == "remote", protocol=settings.protocol,
                   samples_all=settings.samples_all, source="the write-up's full design", item="item")
