"""The backend registry: per provider, where its backend lives and what it can do.

Everything outside ``backends/`` asks these capabilities (``provider_of(spec).batches``), never a
provider's name, so a new provider is one entry here plus its module. Nothing is imported until it is
used: backends, SDKs and start-up probes are ``"module:attribute"`` strings.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: The model the suite's recipes (README, docs/claude.md) and its hints name for a real measurement.
REFERENCE_MODEL = "anthropic/claude-sonnet-5-5"
#: Facts of the shared run state a backend may take as keyword arguments (see ``Shared.backend_options``).
OPTION_FACTS = ("max_concurrency", "seed", "base_url", "exact_tokens", "cache_dir", "replay")


@dataclass(frozen=True)
class Provider:
    """One provider: its backend and its capabilities (all off unless declared)."""

    name: str
    #: ``module:Class`` of its backend, imported only when one is built.
    backend: str
    #: How users know it in messages ("Anthropic API key").
    label: str = ""
    #: Answers are paid requests over the network: ``--longctx-prefetch auto`` sends them up front.
    remote: bool = False
    #: A batch API (``--longctx-batch``); ``batch_api`` is its ``module:Class`` (see ``dispatch.batch``).
    batches: bool = False
    batch_api: str = ""
    #: A token-counting endpoint (``--longctx-exact-tokens``).
    token_counting: bool = False
    #: Always counts tokens with the model's own tokenizer (so exact counts need no option).
    own_tokenizer: bool = False
    #: Scores ``Request.choices`` by likelihood (``--longctx-scoring logprob``).
    logprob_scoring: bool = False
    #: A scripted test double that answers in-process from the ``Oracle`` passed beside the request:
    #: its answers are never cached and there is nothing to send up front.
    in_process: bool = False
    #: Served by the shared local model server the controller starts (``backends.local_server``).
    local_server: bool = False
    #: Prompt caching of a long shared prefix (``--longctx-prompt-cache`` is on by default where True).
    prompt_cache: bool = False
    #: Which of :data:`OPTION_FACTS` its backend takes as keyword arguments.
    options: tuple[str, ...] = ()
    #: ``module:function() -> str | None``: one line when the environment lacks the key it needs.
    key_check: str = ""
    #: The environment variable holding its API key ("" when it needs none).
    key_env: str = ""
    #: A module worth importing while the run plans (an SDK that takes seconds to import).
    sdk: str = ""
    #: ``module:function(name) -> cleanup``: run once on the controller before any other process starts
    #: (it may set environment variables every process then reads); raises ``FatalBackendError`` to stop the run.
    settle: str = ""
    #: ``module:function(name) -> str | None``: one line about the model, said once in the run's header and
    #: report (what it is; a deprecation its SDK knows of).
    model_note: str = ""
    #: ``module:function(name) -> list[str]``: regular expressions of the ``DeprecationWarning`` messages its SDK
    #: repeats on every request; silenced, since ``model_note`` says it once.
    repeated_warnings: str = ""

    @property
    def models(self) -> str:
        """``name/*``, as messages name a provider's models."""
        return f"{self.name}/*"


PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    Provider("fake", "pytest_longctx.backends.fake:FakeBackend", logprob_scoring=True, in_process=True,
             model_note="pytest_longctx.backends.fake:model_note"),
    Provider("local", "pytest_longctx.backends.local:LocalBackend", own_tokenizer=True, logprob_scoring=True,
             local_server=True, options=("max_concurrency", "seed", "base_url"),
             model_note="pytest_longctx.backends.local_models:model_note"),
    Provider("anthropic", "pytest_longctx.backends.anthropic:AnthropicBackend", label="Anthropic", remote=True,
             batches=True, batch_api="pytest_longctx.backends.anthropic_batch:AnthropicBatches",
             token_counting=True, prompt_cache=True,
             options=("max_concurrency", "seed", "exact_tokens", "cache_dir", "replay"),
             key_check="pytest_longctx.backends.anthropic:missing_key_message", key_env="ANTHROPIC_API_KEY",
             sdk="anthropic", model_note="pytest_longctx.backends.anthropic:model_note",
             repeated_warnings="pytest_longctx.backends.anthropic:repeated_warnings"),
    Provider("openai", "pytest_longctx.backends.openai_compat:OpenAIBackend", label="OpenAI", remote=True,
             options=("max_concurrency", "seed"),
             key_check="pytest_longctx.backends.openai_compat:missing_key_message", key_env="OPENAI_API_KEY",
             settle="pytest_longctx.backends.openai_compat:settle_tokenizer"),
)}


def provider_of(spec: Any) -> Provider:
    """The provider of a ``ModelSpec``, a backend (anything with ``.provider``) or a provider name.

    A backend built outside the registry (a test's stub, a user's own class handed to ``ModelClient``)
    has no capabilities and no backend to build.
    """
    name = spec if isinstance(spec, str) else spec.provider
    return PROVIDERS.get(name) or Provider(name, "")


def offering(capability: str) -> str:
    """``anthropic/*``-style names of the providers with ``capability``, for messages (test doubles left out)."""
    names = [p.models for p in PROVIDERS.values() if getattr(p, capability) and not p.in_process]
    return " or ".join(names) or "no"


def load(target: str) -> Any:
    """The attribute a ``module:attribute`` string names, imported now."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
