"""Corpus files for the plugin's own tests, found through the plugin's lookup as a user's run finds them.

The outer session's ``--longctx-data-dir``, ``$LONGCTX_DATA_DIR`` (read when the session starts: the
per-test environment clean-up removes it), the outer cache (``<cache-dir>/corpora``), else a download
into that cache. Without the file and without network, a test that needs it skips with one line naming
what is missing and how to provide it. CI (``.ci/run``) points ``$LONGCTX_DATA_DIR`` at ``../shared/corpora``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.corpus.lookup import DATA_DIR_ENV, CorpusFile, CorpusNotFound, find_corpus
from pytest_longctx.experiments.qa.federal_register import fr_issue
from pytest_longctx.session.keys import SETTINGS_KEY

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
#: Eight whole documents of the 2024-02-12 issue (fixtures/federal_register_excerpt/README.md): the fast tier's corpus
FR_EXCERPT = ROOT / "fixtures" / "federal_register_excerpt" / "FR-2024-02-12.xml"
FR_DATE = "2024-02-12"
CI_HINT = "CI: LONGCTX_DATA_DIR=../shared/corpora"

_ENV_KEY = pytest.StashKey[str | None]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ENV_KEY] = os.environ.get(DATA_DIR_ENV)
    if not _corpora_at_hand(config):
        # The snapshot tests that need a corpus skip, so their snapshots go unused; syrupy would make that a
        # failing exit status. With every corpus at hand (CI) unused snapshots still fail the run.
        config.option.warn_unused_snapshots = True


def _corpora_at_hand(config: pytest.Config) -> bool:
    """Whether every corpus the snapshot tests read is found without a download."""
    from pytest_longctx.experiments.litm.data import corpus_file

    settings = config.stash.get(SETTINGS_KEY, None)
    data_dir = settings.data_dir if settings is not None else None
    cache = (settings.cache_dir if settings is not None else ROOT / ".longctx-cache") / "corpora"
    try:
        for spec in (fr_issue(FR_DATE), corpus_file("qa"), corpus_file("kv-75")):
            find_corpus(spec, data_dir=data_dir, cache_dir=cache, download=False)
    except CorpusNotFound:
        return False
    return True


def find_for_tests(config: pytest.Config, spec: CorpusFile) -> Path:
    """``spec``'s file through the plugin's lookup with the outer session's settings, or a one-line skip."""
    settings = config.stash[SETTINGS_KEY]
    with pytest.MonkeyPatch.context() as mp:
        env = config.stash.get(_ENV_KEY, None)
        if env:
            mp.setenv(DATA_DIR_ENV, env)
        try:
            return find_corpus(spec, data_dir=settings.data_dir, cache_dir=settings.cache_dir / "corpora")
        except CorpusNotFound as exc:
            pytest.skip(f"{exc} ({CI_HINT})")


@pytest.fixture(scope="session")
def fr_xml(pytestconfig: pytest.Config) -> Path:
    """The Federal Register 2024-02-12 issue the shipped question set was written against."""
    return find_for_tests(pytestconfig, fr_issue(FR_DATE))


@pytest.fixture(scope="session")
def fr_data_dir(fr_xml: Path) -> str:
    """A data dir holding ``FR-2024-02-12.xml`` (for the ``--data-dir`` of the qa command)."""
    return str(fr_xml.parent)


def assert_collages_within(qa: Any, budget: int) -> None:
    """Ten seeded collages at ``budget``: the relevant section once, the real token count within the budget and
    within one token a unit of the collage's own count."""
    import random

    from pytest_longctx.corpus.tokens import TiktokenCounter

    counter = TiktokenCounter()
    for sample in range(10):
        q = qa.question(sample, budget)
        collage = qa.collage(q, budget, 50, random.Random(sample))
        text = qa.render(collage)
        assert text.count(qa.pieces[q.section_id].text.strip("\n")) == 1
        actual = counter.count(text)
        assert actual <= budget, (actual, collage.tokens)
        assert abs(actual - collage.tokens) <= len(collage.units) + 2


def assert_examples_in_context(qa: Any, budget: int, k: int) -> None:
    """Twenty seeded collages: every in-context example is another question of a section in the context."""
    import random

    for sample in range(20):
        q = qa.question(sample, budget)
        collage = qa.collage(q, budget, 25, random.Random(sample))
        examples = qa.context_examples(collage, q, k, random.Random(sample))
        assert examples
        present = set(collage.ids()) - {q.section_id}
        for e in examples:
            assert e.question.section_id in present
            assert e.question.id != q.id
