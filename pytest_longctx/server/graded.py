"""A model of known accuracy for the local server: ``--responder graded:<spec>``.

It answers every experiment whose plugin names a grader (hook ``pytest_longctx_graders``; the suite's lrt, qa, docs,
litm and needle do, see :mod:`.graded_prompts`), finds the right answer
itself, and answers right or wrong by a deterministic rule, so a test knows what a run must report:

1. The request's *item* (qa, docs: the question's id in the answer key; litm: the question or the asked key; lrt:
   a digest of the prompt, each trial drawing its own file) has a difficulty ``u = draw(seed, item)`` in [0, 1).
2. With probability ``rho`` (a draw from the prompt) the item's difficulty decides; otherwise the prompt's own
   ``draw(seed, prompt)`` does. The answer is right iff ``u < accuracy``. Two prompts of one item thus agree with
   correlation ``rho**2`` (rho=1: right or wrong together in every cell; rho=0: independent per cell).
3. With probability ``flip`` (a draw from ``flip-seed``, the model and the prompt) the outcome is inverted.

Models with one ``seed`` agree on items as versions of one model do: at ``flip=0`` the items a 0.80 model gets
right are a subset of a 0.85 model's. Different seeds are independent models; two runs of one model differ by
their ``flip-seed``. A judge prompt (docs) is always judged right. A prompt of no known experiment, a question
missing from its key, or a model without an accuracy makes the request fail (the server answers a 500
``api_error``, which the suite reports as an error, never as a wrong answer).

Spec of --responder graded:SPEC, comma-separated NAME=VALUE settings:

    accuracy=ACC        accuracy of every model without its own entry
    MODEL=ACC           accuracy of requests whose "model" is MODEL, e.g. claude-a=0.85,claude-b=0.80
    flip=P              probability that an outcome is inverted (default 0)
    seed=N              difficulty seed: which items are hard (default 0)
    flip-seed=N         seed of the flips: one per run of a model (default 0)
    rho=R               share of prompts decided by their item's difficulty, in [0, 1] (default 1)
    NAME-key=FILE       an answer key an experiment's grader reads, e.g. qa-key=fixtures/questions/FR-2024-02-12.jsonl,
                        docs-key=fixtures/docs (the QA file or its folder), litm-key=nq-open-oracle.jsonl.gz
    grader=MOD:FACTORY  an experiment's own grader (repeatable); the installed plugins' graders
                        (hook pytest_longctx_graders) are always loaded

ACC is a number in [0, 1], or points ACC@TOKENS (the points separated by commas too): linear in the
prompt's token count (the server's count of every text of the request) between the points, flat beyond the
first and the last. Example: graded:accuracy=0.95@2000,0.6@8000,flip=0.02,seed=1
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .graded_prompts import Task, draw, unrecognised
from .graders import Grade, ask, discover, load
from .responders import TokenCounter, approx_token_count, content_texts, count_input_tokens, prefill_text

#: The spec's grammar, for ``--help``: the docstring from "Spec" on.
SPEC_HELP = (__doc__ or "")[(__doc__ or "").index("Spec of"):].strip()
#: Settings that are not a model name.
_SETTINGS = ("accuracy", "flip", "seed", "flip-seed", "rho", "grader")


def _is_setting(name: str) -> bool:
    """A setting (an answer key ``NAME-key`` included), not a model's accuracy."""
    return name in _SETTINGS or name.endswith("-key")


@dataclass(frozen=True)
class Accuracy:
    """An accuracy: constant, or linear in the prompt's tokens between points ``(tokens, accuracy)``."""

    points: tuple[tuple[int, float], ...]

    def at(self, tokens: int) -> float:
        xs = [t for t, _ in self.points]
        i = bisect.bisect_left(xs, tokens)
        if i == 0:
            return self.points[0][1]
        if i == len(xs):
            return self.points[-1][1]
        (t0, a0), (t1, a1) = self.points[i - 1], self.points[i]
        return a0 + (a1 - a0) * (tokens - t0) / (t1 - t0)

    @property
    def constant(self) -> bool:
        return len(self.points) == 1


@dataclass(frozen=True)
class GradedSpec:
    """A parsed ``graded:`` spec (see the module docstring)."""

    accuracy: Accuracy | None = None
    models: Mapping[str, Accuracy] = field(default_factory=dict)
    flip: float = 0.0
    seed: int = 0
    flip_seed: int = 0
    rho: float = 1.0
    graders: tuple[str, ...] = ()
    #: every NAME=VALUE setting given (not the accuracies): what an experiment's grader factory may read
    settings: Mapping[str, str] = field(default_factory=dict)


def _probability(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ValueError(f"graded: {name}={text}: expected a number between 0 and 1")
    return value


def _accuracy(name: str, values: list[str]) -> Accuracy:
    if len(values) == 1 and "@" not in values[0]:
        return Accuracy(((0, _probability(name, values[0])),))
    points: list[tuple[int, float]] = []
    for value in values:
        acc, at, tokens = value.partition("@")
        if not at or not tokens.isdigit():
            raise ValueError(f"graded: {name}={','.join(values)}: expected ACC or ACC@TOKENS,ACC@TOKENS,... "
                             f"(e.g. 0.95@2000,0.6@8000), got {value!r}")
        points.append((int(tokens), _probability(name, acc)))
    if [t for t, _ in points] != sorted({t for t, _ in points}):
        raise ValueError(f"graded: {name}={','.join(values)}: token counts must increase from point to point")
    return Accuracy(tuple(points))


def parse_spec(text: str) -> GradedSpec:
    """Parse ``NAME=VALUE,...`` (without the ``graded:`` prefix); bad input is a one-line ValueError."""
    settings: list[tuple[str, list[str]]] = []
    graders: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        name, eq, value = part.partition("=")
        if not part:
            continue
        if eq and name.strip() == "grader":
            graders.append(value.strip())
        elif eq and name.strip():
            settings.append((name.strip(), [value.strip()]))
        elif part and settings and "@" in part:  # a further point of the accuracy before it
            settings[-1][1].append(part)
        else:
            raise ValueError(f"graded: {part!r} in {text!r}: expected NAME=VALUE (accuracy=, MODEL=, flip=, seed=, "
                             "flip-seed=, rho=, NAME-key=, grader=)")
    seen = [name for name, _ in settings]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise ValueError(f"graded: {twice[0]} is set twice in {text!r}")
    found = dict(settings)
    scalar = {name: values[0] for name, values in settings if _is_setting(name) and name != "accuracy"}
    for name, values in settings:
        if len(values) > 1 and _is_setting(name) and name != "accuracy":
            raise ValueError(f"graded: {name}={','.join(values)}: one value only (points ACC@TOKENS are for "
                             "accuracies)")
    models = {name: _accuracy(name, values) for name, values in settings if not _is_setting(name)}
    accuracy = _accuracy("accuracy", found["accuracy"]) if "accuracy" in found else None
    if accuracy is None and not models:
        raise ValueError(f"graded: {text!r} gives no accuracy; add accuracy=ACC or MODEL=ACC")
    ints = {}
    for name in ("seed", "flip-seed"):
        try:
            ints[name] = int(scalar.get(name, "0"))
        except ValueError:
            raise ValueError(f"graded: {name}={scalar[name]}: expected a whole number") from None
    return GradedSpec(accuracy=accuracy, models=models, flip=_probability("flip", scalar.get("flip", "0")),
                      seed=ints["seed"], flip_seed=ints["flip-seed"], rho=_probability("rho", scalar.get("rho", "1")),
                      graders=tuple(graders),
                      settings=dict(sorted(scalar.items())))


@dataclass(frozen=True)
class Verdict:
    """What the graded model decided for one request, and why."""

    experiment: str
    item: str
    right: bool
    reply: str
    #: The accuracy the rule used (None for a judge, which is never graded).
    accuracy: float | None = None
    flipped: bool = False


def prompt_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message, its blocks joined as the prompt was before it was split for caching."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return "".join(content_texts(message.get("content")))
    return ""


class Graded:
    """The responder: ``Graded(spec)(body) -> reply``; :meth:`verdict` says what it decided and why."""

    def __init__(self, spec: GradedSpec | str, counter: TokenCounter = approx_token_count,
                 graders: list[str] | None = None) -> None:
        """``graders``: ``module:factory`` names of experiments' graders (None: the installed plugins', see
        :mod:`.graders`), besides the spec's ``grader=`` ones."""
        self.spec = parse_spec(spec) if isinstance(spec, str) else spec
        self.counter = counter
        self.graders: list[tuple[str, Grade]] = load([*(discover() if graders is None else graders),
                                                       *self.spec.graders], self.spec.settings)

    def task(self, prompt: str) -> Task:
        """What the prompt asks: an experiment's own grader's reading first, else the built-in readings."""
        found = ask(self.graders, prompt)
        if found is None:
            raise unrecognised(prompt)
        return Task(found["experiment"], found["item"], found["right"], found["wrong"],
                    graded=bool(found.get("graded", True)))

    def accuracy(self, body: Mapping[str, Any]) -> float:
        """The accuracy of this request's model at this request's length."""
        model = str(body.get("model"))
        accuracy = self.spec.models.get(model, self.spec.accuracy)
        if accuracy is None:
            raise LookupError(f"graded: no accuracy for model {model!r}; add {model}=ACC or accuracy=ACC to the spec")
        return accuracy.at(0 if accuracy.constant else count_input_tokens(body, self.counter))

    def verdict(self, body: Mapping[str, Any]) -> Verdict:
        """Right or wrong for one request, by the rule of the module docstring."""
        prompt = prompt_text(body)
        task = self.task(prompt)
        if not task.graded:
            return Verdict(task.experiment, task.item, True, task.right)
        spec, accuracy = self.spec, self.accuracy(body)
        shared = draw(spec.seed, "shared", prompt) < spec.rho
        u = draw(spec.seed, "item", task.experiment, task.item) if shared else draw(spec.seed, "prompt", prompt)
        flipped = draw(spec.flip_seed, "flip", body.get("model"), prompt) < spec.flip
        right = (u < accuracy) != flipped
        return Verdict(task.experiment, task.item, right, task.right if right else task.wrong, accuracy, flipped)

    def __call__(self, body: dict[str, Any]) -> str:
        reply = self.verdict(body).reply
        prefill = prefill_text(body)
        return reply[len(prefill):] if prefill and reply.startswith(prefill) else reply
