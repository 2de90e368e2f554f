"""A design option the block-design experiments (qa, litm, docs) cannot run is a usage error: exit 4 while
collecting, the message on stderr, no traceback. Each experiment's own module tests what its option resolves to."""

from __future__ import annotations

import pytest

#: A remote model: its default design is blocks.
MODEL = "anthropic/claude-sonnet-4-5"
#: (id, arguments, what the usage error says)
BAD_DESIGNS = [
    ("qa-blocks-under-source", ["--longctx-protocol", "source", "--longctx-qa-design", "blocks"],
     "--longctx-qa-design blocks: the source protocol keeps the study's full-factorial"),
    ("litm-blocks-under-source", ["--longctx-protocol", "source", "--longctx-litm-design", "blocks"],
     "--longctx-litm-design blocks: the source protocol keeps the paper's full design"),
    ("litm-half", ["--longctx-litm-design", "half"], "--longctx-litm-design: expected blocks or full, got 'half'"),
    ("docs-blocks-under-source", ["--longctx-protocol", "source", "--longctx-docs-design", "blocks"],
     "--longctx-docs-design blocks: the source protocol keeps the write-up's full design"),
    ("docs-some", ["--longctx-docs-design", "some"], "--longctx-docs-design: expected blocks or full, got 'some'"),
]


@pytest.mark.parametrize(("args", "text"), [row[1:] for row in BAD_DESIGNS], ids=[row[0] for row in BAD_DESIGNS])
def test_a_bad_design_is_a_usage_error(pytester: pytest.Pytester, args: list[str], text: str) -> None:
    result = pytester.runpytest("--collect-only", "--longctx-model", MODEL, *args)
    assert result.ret == 4
    assert text in result.stderr.str() and "Traceback" not in result.stderr.str()
