"""Fixtures and condition axes of the multiple-choice QA experiment (Federal Register)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_longctx.client import ModelClient
from pytest_longctx.corpus.federal_register import load_issue, locate
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.keys import SETTINGS_KEY
from pytest_longctx.options import Settings
from pytest_longctx.qa.conditions import qa_sizes
from pytest_longctx.qa.experiment import QaData
from pytest_longctx.qa.questions import load_questions

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "context_tokens" in metafunc.fixturenames:
        window = metafunc.config.stash[SETTINGS_KEY].context_window
        sizes = qa_sizes(window, depth=metafunc.definition.name.endswith("depth"))
        metafunc.parametrize("context_tokens", sizes, ids=[f"{s}tok" for s in sizes])


@pytest.fixture(scope="session")
def qa(longctx_settings: Settings, longctx_client: ModelClient) -> QaData:
    """The issue's sections (sized with the model's tokenizer), the question set and the question pool."""
    s = longctx_settings
    corpora = s.cache_dir / "corpora"
    path = locate(s.fr_date, path=None, data_dir=s.data_dir, cache_dir=corpora)  # one-line UsageError if absent
    issue = load_issue(path, s.fr_date, TiktokenCounter(), corpora)
    questions = load_questions(FIXTURES / "questions" / f"FR-{s.fr_date}.jsonl")
    backend = longctx_client.backend
    return QaData.load(issue, questions, backend.count_tokens, backend.tokenizer, s.cache_dir, s.seed, s.model.spec)


@pytest.fixture(scope="session")
def unrelated_examples() -> list:
    return load_questions(FIXTURES / "qa" / "unrelated_examples.jsonl")
