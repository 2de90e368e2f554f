"""The run's settings: what its options resolved to, frozen, read by every layer that needs them.

They are resolved once (CLI > ini > default) in ``session/options.py`` and kept in ``config.stash``; this module
only defines them, so the request path and the reports can read them without reaching up to the pytest glue.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from pytest_longctx.backends import Price
from pytest_longctx.backends.model_spec import ModelSpec
from pytest_longctx.gate_spec import DEFAULT_ALPHA, DEFAULT_EFFECTIVE_ACCURACY, GateSettings, Threshold


@dataclass(frozen=True)
class Settings:
    """The resolved options of one run."""

    model: ModelSpec
    seed: int
    samples: int
    report_dir: Path
    thresholds: tuple[Threshold, ...]
    compare: Path | None
    cache: str
    cache_dir: Path
    max_concurrency: int
    context_window: int
    data_dir: str | None
    judge: ModelSpec
    plan: bool
    plan_out: Path | None = None
    prefetch: str = "auto"
    batch: bool = False
    exact_tokens: bool = False
    protocol: str = "longctx"
    #: --longctx-samples all: every eligible item in every cell (``samples`` then holds the profile's default)
    samples_all: bool = False
    #: --longctx-samples (or its ini) was given as a number; otherwise experiments may use their source's count
    samples_given: bool = False
    #: --longctx-prompt-cache as given (on/off/auto) and what it resolved to for the model under test
    prompt_cache_mode: str = "auto"
    prompt_cache: bool = False
    #: --longctx-gc-freeze: freeze the heap after start-up and after collection (``session/heap.py``)
    gc_freeze: bool = True
    #: the gate's family-wise false-alarm rate, the effective length's accuracy bar, the plan's drop to detect
    alpha: float = DEFAULT_ALPHA
    effective_accuracy: float = DEFAULT_EFFECTIVE_ACCURACY
    detect: float | None = None
    rootdir: Path = field(default=Path("."))
    #: every --longctx-model in the order given (``model`` is the reference among them); one entry for one model
    models: tuple[ModelSpec, ...] = ()
    #: --longctx-compare-partial: a partial compared run is accepted (and said in every verdict), not refused
    compare_partial: bool = False
    #: --longctx-sequential and --longctx-budget (``session/sequential_gate.py``)
    sequential: bool = False
    budget: float | None = None
    #: --longctx-sequential-stop: "alarm" (per-alarm stops) or "run" (the whole run only)
    sequential_stop: str = "alarm"
    #: --longctx-prices: overrides of genai-prices' list prices (``backends/prices.py``)
    prices: tuple[Price, ...] = ()

    @property
    def several(self) -> bool:
        """Whether this run compares several models (``--longctx-model`` given more than once)."""
        return len(self.models) > 1

    def price(self, spec: ModelSpec) -> Price | None:
        """``spec``'s price: an override, else its profile's (genai-prices; free for models that run here); None:
        price unknown."""
        return next((p for p in self.prices if p.model == spec.spec), None) or spec.profile.price

    @property
    def gate(self) -> GateSettings:
        """What the gate reads of these settings: the fields of :class:`~pytest_longctx.gate_spec.GateSettings`."""
        return GateSettings(**{f.name: getattr(self, f.name) for f in fields(GateSettings)})

    def to_json(self) -> dict[str, object]:
        """The settings as the run record keeps them (``settings`` in longctx.json)."""
        return {
            "model": self.model.spec,
            "provider": self.model.provider,
            "seed": self.seed,
            "samples": self.samples,
            "cache": self.cache,
            "max_concurrency": self.max_concurrency,
            "context_window": self.context_window,
            "thresholds": [t.text for t in self.thresholds],
            "compare": str(self.compare) if self.compare else None,
            "compare_partial": self.compare_partial,
            "judge": self.judge.spec,
            "plan": self.plan,
            "prefetch": self.prefetch,
            "batch": self.batch,
            "exact_tokens": self.exact_tokens,
            "protocol": self.protocol,
            "samples_all": self.samples_all,
            "prompt_cache": self.prompt_cache,
            "prompt_cache_mode": self.prompt_cache_mode,
            "alpha": self.alpha,
            "effective_accuracy": self.effective_accuracy,
            **({"models": [m.spec for m in self.models]} if self.several else {}),
            "sequential": self.sequential,
            "budget": self.budget,
            **({"prices": [p.to_json() for p in self.prices]} if self.prices else {}),
            **({"sequential_stop": self.sequential_stop} if self.sequential else {}),
        }
