"""The qa experiment's cells, decided once at collection (identically on every xdist worker).

Which context sizes (the corpus must fill them), how many trials a cell gets (``--longctx-samples``,
``all``, or the model profile's qa default), which prompt variants and positions run, and whether the
baseline that filters ``all`` is complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_longctx import Settings
from pytest_longctx.corpus.lookup import CorpusNotFound
from pytest_longctx.corpus.missing import data_missing
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.qa import baseline, source
from pytest_longctx.experiments.qa.conditions import CANDIDATES, CPU_SIZES, CPU_VARIANTS, RESERVE, qa_sizes
from pytest_longctx.experiments.qa.federal_register import Issue, fr_issue, load_issue, locate
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS
from pytest_longctx.experiments.qa.options import FR_DATE, QaOptions
from pytest_longctx.experiments.qa.questions import load_questions
from pytest_longctx.experiments.qa.sizing import choose_sizes

#: Tokens a written section adds beyond its cl100k count (wrapper tags and separator), per protocol.
OVERHEAD = {"longctx": 8, "source": 1}


@dataclass(frozen=True)
class QaPlan:
    """What the qa tests of this run look like."""

    sizes: tuple[int, ...]
    depth_sizes: tuple[int, ...]
    size_note: str | None
    #: trials per qa cell; None: --longctx-samples as given (the plugin's default)
    qa_samples: int | None
    control_samples: int | None
    prompts: tuple[str, ...]
    examples: tuple[str, ...]
    depths: tuple[int, ...]
    #: why the qa cells do not run (``all`` without a complete baseline), else None
    blocked: str | None
    capacity: int
    #: multiple-choice scoring of this run (--longctx-scoring resolved for the model and protocol)
    scoring: str = "generate"
    #: which cells ask which questions: "blocks" (:mod:`.design`) or "full" (every question in every cell)
    design: str = "full"


PLAN_KEY = pytest.StashKey[QaPlan]()


def dates(options: QaOptions) -> list[str]:
    """``--longctx-fr-date A,B``: the questions' issue first, then distractor-only issues."""
    return [d.strip() for d in options.fr_date.split(",") if d.strip()]


#: The experiments a missing Federal Register issue keeps from running.
EXPERIMENTS = ("qa", "qa-baseline", "qa-control")


def load_issues(settings: Settings, options: QaOptions) -> list[Issue]:
    """The run's issues, found where the user put them (a run never downloads): a missing one skips the qa tests
    with one line naming the ``longctx-data fetch`` command that gets it (:class:`DataMissing`)."""
    corpora = settings.cache_dir / "corpora"
    counter = TiktokenCounter()
    paths, missing = [], []
    looked: tuple[str, ...] = ()  # where the lookup looked (the same places for every issue)
    for d in dates(options):
        try:
            paths.append(locate(d, path=None, data_dir=settings.data_dir, cache_dir=corpora, download=False))
        except CorpusNotFound as exc:
            missing.append((d, exc.spec or fr_issue(d)))
            looked = exc.looked
    if missing:
        fetch = "qa" if [d for d, _ in missing] == [FR_DATE.default] else f"qa:{','.join(d for d, _ in missing)}"
        raise data_missing(EXPERIMENTS, [spec for _, spec in missing], fetch, looked)
    return [load_issue(path, d, counter, corpora) for path, d in zip(paths, dates(options), strict=True)]


def question_file(root: Path, options: QaOptions) -> Path:
    return root / "questions" / f"FR-{dates(options)[0]}.jsonl"


def plan(settings: Settings, options: QaOptions, fixtures: Path) -> QaPlan:
    """Decide the qa cells from the settings, the model, the corpus and the stored baseline."""
    cpu = settings.model.profile.runs == "cpu"  # small contexts and 10 trials a cell under either protocol
    issues = load_issues(settings, options)
    cap = sum(s.tokens + OVERHEAD[settings.protocol] for i in issues for s in i.sections)
    corpus = " + ".join(f"FR {i.date}" for i in issues)
    window = settings.context_window
    explicit = bool(options.context_sizes)
    if explicit:
        wanted = list(options.context_sizes)
    elif cpu:
        wanted = list(CPU_SIZES)
    elif settings.protocol == "source":
        wanted = [b for b in source.BUDGETS if b <= window - RESERVE] or qa_sizes(window)[-1:]
    else:
        wanted = qa_sizes(window, capacity=cap)
    sizes, note = choose_sizes(wanted, cap, source=corpus, explicit=explicit)
    if note is None and not explicit and settings.protocol == "longctx" and not cpu:
        _, note = choose_sizes([c for c in CANDIDATES if c <= window - RESERVE], cap, source=corpus, explicit=False)
    if not sizes:
        raise pytest.UsageError(note or "no qa context size")
    depth_sizes = tuple(sizes) if explicit or settings.protocol == "source" else tuple(
        qa_sizes(window, depth=True, capacity=cap))
    qa_n: int | None = None  # trials per cell set by the plan itself (--longctx-samples all); else the defaults'
    prompts: tuple[str, ...] = PROMPTS
    examples: tuple[str, ...] = EXAMPLES
    if cpu and not explicit and settings.protocol == "longctx":
        prompts = tuple(sorted({v.split("/")[0] for v in CPU_VARIANTS}))
        examples = tuple(sorted({v.split("/")[1] for v in CPU_VARIANTS}))
    depths = () if settings.protocol == "source" or cpu else (0, 25, 50, 75, 100)
    questions = load_questions(question_file(fixtures, options))
    blocked = None
    control_n = qa_n
    if settings.samples_all:
        results = baseline.load(settings.cache_dir, settings.model.spec, settings.protocol)
        path = baseline.baseline_path(settings.cache_dir, settings.model.spec, settings.protocol)
        have = sum(1 for q in questions if q.id in results)
        control_n = len(questions)
        qa_n = sum(1 for q in questions if results.get(q.id, False))
        if have < len(questions) and settings.plan:
            qa_n = len(questions)  # a plan counts every question: the upper bound of what the qa cells will send
        elif have < len(questions):
            blocked = (f"--longctx-samples all: qa cells use only the questions {settings.model.spec} answered right "
                       f"with its own section, but {path} has {have} of {len(questions)}; this run completes the "
                       f"baseline (qa-baseline, cached), run again for the qa cells")
    design = "full" if settings.samples_all else options.design
    return QaPlan(tuple(sizes), depth_sizes, note, qa_n, control_n, prompts, examples, depths, blocked, cap,
                  options.scoring, design)


def get_plan(config: pytest.Config, settings: Settings, fixtures: Path) -> QaPlan:
    """The run's plan, computed once per process."""
    if PLAN_KEY not in config.stash:
        from pytest_longctx import UsageError
        from pytest_longctx.experiments.qa.plugin import qa_options

        try:
            config.stash[PLAN_KEY] = plan(settings, qa_options(config), fixtures)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    return config.stash[PLAN_KEY]
