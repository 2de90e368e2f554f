"""pytest-longctx: measure LLM accuracy over long contexts with pytest, and gate upgrades on it.

The public API: everything an experiment (a test file, a ``conftest.py`` or a plugin) needs. Names
load on first use, so importing the package (as pytest does for the plugin) stays cheap.

* In a test: the ``longctx`` fixture is a :class:`Trial`; ask with a :class:`Request`, declare the
  expected answer with :meth:`Trial.expect`, record with :meth:`Trial.record`, then ``assert``.
* Declaring an experiment once (name, options, record settings, defaults for a model): :class:`Experiment`.
* In ``pytest_addoption`` / ``pytest_configure``: :class:`OptionDef`, :func:`add_options`,
  :func:`option_value`, :func:`resolve_options` and the value parsers :func:`whole_number`,
  :func:`whole_numbers`, :func:`true_or_false`.
* In ``pytest_generate_tests`` / fixtures: :func:`settings` (the run's resolved options),
  :func:`set_cell_samples`, :func:`samples_for`, :class:`Defaults` (``pytest_longctx_defaults``),
  :func:`find_corpus` / :class:`CorpusFile` (data files), :func:`data_missing`
  (skip an experiment whose data is not here, with one line saying how to get it), :class:`UsageError`.
* For command-line tools (question generation): :func:`parse_model_spec`, :func:`build_backend`,
  :class:`ModelClient`, :class:`ResponseCache`, :func:`missing_key_message`, :func:`start_model_server`.
* In the report hooks (``pytest_longctx.hookspecs``): :class:`Section`, :class:`Figure` and the chart
  builders :func:`cell_bars`, :func:`accuracy_lines`; :class:`Evidence` and :class:`LengthAxis` (units of
  evidence and the context-length axis, ``pytest_longctx_evidence``).
* For an experiment whose items are limited (a folder of reviewed items): :func:`items_power` (what N items
  detect, and how many a drop needs).
* For an experiment's own tables: :func:`pooled_accuracy` (a clustered interval), :func:`paired_accuracy_difference`
  (two conditions paired on items) and :func:`effective_length` (RULER's and NoLiMa's relative effective length).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_longctx.version import __version__ as __version__

#: public name -> "module:attribute", imported on first use
_EXPORTS = {
    "Request": "pytest_longctx.backends.base:Request",
    "Message": "pytest_longctx.backends.base:Message",
    "Completion": "pytest_longctx.backends.base:Completion",
    "Oracle": "pytest_longctx.backends.base:Oracle",
    "shared_prefix_end": "pytest_longctx.backends.base:shared_prefix_end",
    "Trial": "pytest_longctx.session.trial:Trial",
    "ModelClient": "pytest_longctx.dispatch.client:ModelClient",
    "Settings": "pytest_longctx.run_settings:Settings",
    "settings": "pytest_longctx.api:settings",
    "active": "pytest_longctx.api:active",
    "Experiment": "pytest_longctx.api:Experiment",
    "set_cell_samples": "pytest_longctx.api:set_cell_samples",
    "samples_for": "pytest_longctx.session.defaults:samples_for",
    "Defaults": "pytest_longctx.session.defaults:Defaults",
    "OptionDef": "pytest_longctx.session.option_def:OptionDef",
    "add_options": "pytest_longctx.api:add_options",
    "option_value": "pytest_longctx.api:option_value",
    "resolve_options": "pytest_longctx.api:resolve_options",
    "whole_number": "pytest_longctx.api:whole_number",
    "whole_numbers": "pytest_longctx.api:whole_numbers",
    "true_or_false": "pytest_longctx.api:true_or_false",
    "offering": "pytest_longctx.backends.registry:offering",
    "UsageError": "pytest_longctx.errors:UsageError",
    "BackendError": "pytest_longctx.errors:BackendError",
    "CorpusFile": "pytest_longctx.corpus.lookup:CorpusFile",
    "CorpusNotFound": "pytest_longctx.corpus.lookup:CorpusNotFound",
    "find_corpus": "pytest_longctx.corpus.lookup:find_corpus",
    "DataMissing": "pytest_longctx.corpus.missing:DataMissing",
    "data_missing": "pytest_longctx.corpus.missing:data_missing",
    "Template": "pytest_longctx.templates:Template",
    "Section": "pytest_longctx.reporting.sections:Section",
    "Figure": "pytest_longctx.reporting.charts:Figure",
    "cell_bars": "pytest_longctx.reporting.figures:cell_bars",
    "accuracy_lines": "pytest_longctx.reporting.figures:accuracy_lines",
    "ModelSpec": "pytest_longctx.backends.model_spec:ModelSpec",
    "parse_model_spec": "pytest_longctx.backends.model_spec:parse_model_spec",
    "provider_of": "pytest_longctx.backends.registry:provider_of",
    "build_backend": "pytest_longctx.backends:build_backend",
    "missing_key_message": "pytest_longctx.backends:missing_key_message",
    "start_model_server": "pytest_longctx.backends:start_model_server",
    "ResponseCache": "pytest_longctx.dispatch.cache:ResponseCache",
    "Evidence": "pytest_longctx.results.evidence:Evidence",
    "LengthAxis": "pytest_longctx.results.evidence:LengthAxis",
    "wilson": "pytest_longctx.results.stats:wilson",
    "items_power": "pytest_longctx.results.power:items_power",
    "effective_length": "pytest_longctx.results.effective:effective_length",
    "pooled_accuracy": "pytest_longctx.results.clustered:pooled_accuracy",
    "paired_accuracy_difference": "pytest_longctx.results.clustered:paired_difference",
    "mcnemar_exact": "pytest_longctx.results.stats:mcnemar_exact",
    "GATE_EXIT_CODE": "pytest_longctx.results.thresholds:GATE_EXIT_CODE",
    "GATE_ERROR_EXIT_CODE": "pytest_longctx.results.thresholds:GATE_ERROR_EXIT_CODE",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    ref = _EXPORTS.get(name)
    if ref is None:
        raise AttributeError(f"module 'pytest_longctx' has no attribute {name!r}")
    module, _, attr = ref.partition(":")
    # Not cached here: the name follows the module in sys.modules, so a pytester run in-process (which drops the
    # modules it imported) and this package never hold two different classes under one name.
    return getattr(importlib.import_module(module), attr)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from pytest_longctx.api import Experiment as Experiment
    from pytest_longctx.api import active as active
    from pytest_longctx.api import add_options as add_options
    from pytest_longctx.api import option_value as option_value
    from pytest_longctx.api import resolve_options as resolve_options
    from pytest_longctx.api import set_cell_samples as set_cell_samples
    from pytest_longctx.api import settings as settings
    from pytest_longctx.api import true_or_false as true_or_false
    from pytest_longctx.api import whole_number as whole_number
    from pytest_longctx.api import whole_numbers as whole_numbers
    from pytest_longctx.backends.base import Completion as Completion
    from pytest_longctx.backends.base import Message as Message
    from pytest_longctx.backends.base import Oracle as Oracle
    from pytest_longctx.backends.base import Request as Request
    from pytest_longctx.backends.base import shared_prefix_end as shared_prefix_end
    from pytest_longctx.backends.registry import offering as offering
    from pytest_longctx.corpus.lookup import (
        CorpusFile as CorpusFile,
    )
    from pytest_longctx.corpus.lookup import (
        CorpusNotFound as CorpusNotFound,
    )
    from pytest_longctx.corpus.lookup import (
        find_corpus as find_corpus,
    )
    from pytest_longctx.corpus.missing import DataMissing as DataMissing
    from pytest_longctx.corpus.missing import data_missing as data_missing
    from pytest_longctx.dispatch.client import ModelClient as ModelClient
    from pytest_longctx.errors import BackendError as BackendError
    from pytest_longctx.errors import UsageError as UsageError
    from pytest_longctx.reporting.charts import Figure as Figure
    from pytest_longctx.reporting.figures import accuracy_lines as accuracy_lines
    from pytest_longctx.reporting.figures import cell_bars as cell_bars
    from pytest_longctx.reporting.sections import Section as Section
    from pytest_longctx.results.clustered import paired_difference as _paired_difference
    from pytest_longctx.results.clustered import pooled_accuracy as pooled_accuracy
    from pytest_longctx.results.effective import effective_length as effective_length
    from pytest_longctx.results.evidence import Evidence as Evidence
    from pytest_longctx.results.evidence import LengthAxis as LengthAxis
    from pytest_longctx.results.power import items_power as items_power
    from pytest_longctx.results.thresholds import (
        GATE_ERROR_EXIT_CODE as GATE_ERROR_EXIT_CODE,
    )
    from pytest_longctx.results.thresholds import (
        GATE_EXIT_CODE as GATE_EXIT_CODE,
    )
    from pytest_longctx.run_settings import Settings as Settings
    from pytest_longctx.session.defaults import Defaults as Defaults
    from pytest_longctx.session.defaults import samples_for as samples_for
    from pytest_longctx.session.option_def import OptionDef as OptionDef
    from pytest_longctx.session.trial import Trial as Trial
    from pytest_longctx.templates import Template as Template

    paired_accuracy_difference = _paired_difference
