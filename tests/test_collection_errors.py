"""A collection error in a project that uses the plugin is pytest's own error, not an INTERNALERROR."""

from __future__ import annotations

import pytest


def test_a_module_that_fails_to_import_is_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="import no_such_module_for_longctx\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "AttributeError" not in out
    assert result.ret == pytest.ExitCode.INTERRUPTED  # "Interrupted: 1 error during collection"
    assert "no_such_module_for_longctx" in out
