"""Several models in one session: which models, which is the reference, and each model's slug.

``--longctx-model`` given more than once runs every condition for each model: the plugin parametrizes
:data:`MODEL_ARG` (the ``longctx`` fixture's model) with the models' specs, after every experiment has built its
conditions, so the models answer the same seed-derived items and prompts and pair item by item. The model is not
a condition parameter: cell keys, trial seeds and items are the same for every model.
"""

from __future__ import annotations

import re

import pytest

from pytest_longctx.backends.model_spec import ModelSpec, parse_model_spec
from pytest_longctx.backends.registry import offering, provider_of
from pytest_longctx.errors import UsageError
from pytest_longctx.session.identity import MODEL_ARG as MODEL_ARG  # re-exported: the plugin parametrizes it
from pytest_longctx.session.option_def import OptionDef


def slug(spec: str) -> str:
    """A model's name in test ids and file names: ``anthropic/claude-a`` -> ``anthropic-claude-a``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-") or "model"


def _given(config: pytest.Config, opt: OptionDef) -> list[str]:
    """Every ``--longctx-model`` on the command line, else the ini's lines, else the default (one)."""
    cli = config.getoption(opt.dest)
    if cli is not None:
        return [cli] if isinstance(cli, str) else [str(v) for v in cli]
    ini = config.getini(opt.dest)
    lines = [ini] if isinstance(ini, str) else list(ini or [])
    found = [str(v).strip() for v in lines if str(v).strip()]
    return found or [str(opt.default)]


def resolve_models(config: pytest.Config, model_opt: OptionDef,
                   reference_opt: OptionDef) -> tuple[tuple[ModelSpec, ...], ModelSpec]:
    """The models in the order given and the reference among them (one-line usage errors otherwise)."""
    models: list[ModelSpec] = []
    for text in _given(config, model_opt):
        spec = parse_model_spec(text, flag=model_opt.flag)
        if spec in models:
            raise UsageError(f"{model_opt.flag}: {spec.spec} is given twice; name each model once")
        models.append(spec)
    slugs = [slug(m.spec) for m in models]
    if len(set(slugs)) < len(slugs):
        raise UsageError(f"{model_opt.flag}: {', '.join(m.spec for m in models)} have the same file name; "
                         "name models that differ in more than punctuation")
    local = [m.spec for m in models if provider_of(m).local_server]
    if len(local) > 1:
        raise UsageError(f"{model_opt.flag}: one model of {offering('local_server')} a run ({', '.join(local)} "
                         "given): the run starts one model server; run the others in their own sessions")
    wanted = config.getoption(reference_opt.dest) or config.getini(reference_opt.dest)
    if not wanted:
        return tuple(models), models[0]
    if len(models) < 2:
        raise UsageError(f"{reference_opt.flag}: needs several {model_opt.flag} to choose from; drop it")
    text = str(wanted).strip()
    found = [m for m in models if text in (m.spec, m.name, slug(m.spec))]
    if len(found) != 1:
        names = ", ".join(m.spec for m in models)
        raise UsageError(f"{reference_opt.flag}: {text!r} is {'ambiguous' if found else 'not'} one of the models "
                         f"({names}); pass one of them")
    return tuple(models), found[0]


def check_several_modes(models: tuple[ModelSpec, ...], *, prefetch: str, batch: bool) -> None:
    """Modes that serve one model only: refused (one line) when several models run."""
    if len(models) < 2:
        return
    if batch:
        raise UsageError("--longctx-batch: a batch run sends one model's requests; with several --longctx-model "
                         "run live (drop --longctx-batch)")
    if prefetch == "on":
        raise UsageError("--longctx-prefetch on: prefetch sends one model's requests; with several "
                         "--longctx-model use auto or off (tests then send their own requests)")
