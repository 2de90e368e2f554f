"""What the graded model reads in a prompt: which experiment asks, about which item, the right answer and a wrong one.

The server knows no experiment (import contract): each experiment reads its own prompts in its grader, which its
plugin names through the ``pytest_longctx_graders`` hook (:mod:`.graders` loads them by name; the built-in ones are
``pytest_longctx/experiments/<name>/grader.py``). A prompt no grader claims, or one its grader cannot read, makes
the request fail with :class:`UnrecognisedPrompt` (the server answers a 500).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_longctx.util.grading import draw as draw


class UnrecognisedPrompt(ValueError):
    """A prompt the graded model cannot place (a bug in the test's set-up: the server answers a 500)."""


@dataclass(frozen=True)
class Task:
    """One request as the graded model understands it.

    ``graded`` is False for a judge: its verdict is always right (it grades, it is not graded).
    """

    experiment: str
    item: str
    right: str
    wrong: str
    graded: bool = True


def unrecognised(prompt: str) -> UnrecognisedPrompt:
    return UnrecognisedPrompt(f"graded: no experiment of the suite asks this prompt: {prompt[:80]!r}")
