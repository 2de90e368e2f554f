"""Fixtures of the docs experiment: the user's documents, their reviewed questions, token counts."""

from __future__ import annotations

import pytest

from pytest_longctx.client import ModelClient
from pytest_longctx.docs.experiment import DocsExperiment
from pytest_longctx.errors import UsageError
from pytest_longctx.options import Settings


@pytest.fixture(scope="session")
def docs(longctx_settings: Settings, longctx_client: ModelClient) -> DocsExperiment:
    """--longctx-docs (default fixtures/docs) with its QA file, counted with the model's tokenizer."""
    s = longctx_settings
    folder = s.docs or s.rootdir / "fixtures" / "docs"
    if not folder.is_dir():
        raise UsageError(f"{folder} not found; pass --longctx-docs DIR (a folder of .txt/.md documents)")
    label = folder.relative_to(s.rootdir).as_posix() if folder.is_relative_to(s.rootdir) else str(folder)
    return DocsExperiment.load(folder, count_tokens=longctx_client.backend.count_tokens, budget=s.docs_context,
                               review=s.docs_review, scorer=s.docs_scorer, use_judge=s.docs_judge, label=label)
