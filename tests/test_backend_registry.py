"""The backend registry: every provider's entry resolves, its options fit its backend, and nothing outside
``backends/`` (and the Messages-API test server) names a provider or imports a provider's module."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from pytest_longctx.backends import build_backend, missing_key_message
from pytest_longctx.backends.model_spec import parse_model_spec
from pytest_longctx.backends.registry import OPTION_FACTS, PROVIDERS, Provider, load, offering, provider_of
from pytest_longctx.session.keys import Shared

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_longctx"
#: Folders that may name providers: the backends themselves, and the local server that emulates their APIs.
MAY_NAME = ("backends/", "server/")
#: Modules outside ``backends/`` that may import from it, and what (the protocol, specs, the registry, the
#: prompt-cache arithmetic); a provider's own module (anthropic, openai_compat, local*, fake, http, retry) never.
PUBLIC = {"pytest_longctx.backends", "pytest_longctx.backends.base", "pytest_longctx.backends.model_spec",
          "pytest_longctx.backends.registry", "pytest_longctx.backends.prompt_cache"}
#: Known exceptions, each with its reason (the report of issue #13 part E lists them as what remains).
ALLOWED = {
    # the questions of the qa study are written by Claude, as in the study: a method choice of the experiment
    "experiments/qa/__main__.py",
}
#: A valid model of every provider.
EXAMPLES = {"fake": "fake/perfect", "local": "local/smollm2-135m", "openai": "openai/gpt-x",
            "anthropic": "anthropic/claude-x"}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(MAY_NAME) and rel not in ALLOWED:
            out.append((rel, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def test_no_module_outside_backends_names_a_provider() -> None:
    found = [f"{rel}:{node.lineno}: {node.value!r}" for rel, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PROVIDERS]
    assert not found, "ask the registry's capabilities (backends/registry.py) instead:\n" + "\n".join(found)


def test_no_module_outside_backends_imports_a_providers_module() -> None:
    found = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{rel}:{node.lineno}: {name}" for name in names  # type: ignore[attr-defined]
                      if name.startswith("pytest_longctx.backends") and name not in PUBLIC]
    assert not found, "import the backends package's public names instead:\n" + "\n".join(found)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_entry_resolves_and_its_options_fit_its_backend(name: str) -> None:
    provider = PROVIDERS[name]
    assert provider.name == name and provider.models == f"{name}/*"
    cls = load(provider.backend)
    assert cls.provider == name  # what records, cache keys and provider_of(backend) read
    for target in (provider.key_check, provider.settle, provider.batch_api):
        if target:
            assert callable(load(target)), target
    assert set(provider.options) <= set(OPTION_FACTS)
    accepted = inspect.signature(cls).parameters
    assert set(provider.options) <= set(accepted), f"{cls.__name__} takes no {set(provider.options) - set(accepted)}"
    shared = Shared(workers=2, local_url="http://127.0.0.1:1", max_concurrency=8, seed=3)
    spec = parse_model_spec(EXAMPLES[name])
    assert sorted(shared.backend_options(spec)) == sorted(provider.options)
    if provider.options:
        assert shared.backend_options(spec)["max_concurrency"] == 4  # the fair share of every worker


def test_backends_build_from_the_registry_with_the_shared_options() -> None:
    shared = Shared(local_url="http://127.0.0.1:9", seed=5)
    for text in EXAMPLES.values():
        spec = parse_model_spec(text)
        backend = build_backend(spec, context_window=1000, **shared.backend_options(spec))
        assert provider_of(backend) is PROVIDERS[spec.provider]
        assert backend.model == spec.name


def test_capabilities_as_declared() -> None:
    """What the rest of the plugin relies on (each was a provider-name test before the registry)."""
    remote = {p for p, v in PROVIDERS.items() if v.remote}
    assert remote == {"anthropic", "openai"}  # prefetch auto sends up front; an API key is checked
    assert {p for p, v in PROVIDERS.items() if v.in_process} == {"fake"}  # never cached, given the oracle
    assert {p for p, v in PROVIDERS.items() if v.local_server} == {"local"}
    assert {p for p, v in PROVIDERS.items() if v.prompt_cache} == {"anthropic"}
    assert offering("batches") == offering("token_counting") == "anthropic/*"
    assert offering("logprob_scoring") == offering("own_tokenizer") == "local/*"  # fake/* is left out of messages


def test_a_backend_outside_the_registry_has_no_capabilities() -> None:
    class Stub:
        provider = "stub"

    assert provider_of(Stub()) == Provider("stub", "")
    assert not provider_of(Stub()).in_process and missing_key_message("fake") is None


def test_the_key_check_is_the_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    assert (missing_key_message("anthropic") or "").startswith("ANTHROPIC_API_KEY is not set")
    assert (missing_key_message("openai") or "").startswith("OPENAI_API_KEY is not set")
    assert missing_key_message("local") is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert missing_key_message("anthropic") is None and missing_key_message("openai") is None
