"""Rendering multiple-choice QA prompts: option shuffling, example blocks, the 8 prompt variants."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_longctx import Request, shared_prefix_end
from pytest_longctx.experiments.qa import templates as T
from pytest_longctx.experiments.qa.questions import Question
from pytest_longctx.experiments.qa.scoring import LETTERS

PROMPTS = ("plain", "scratchpad")
#: ``general-2``: two general-knowledge questions (the study's first president and boiling point of water);
#: ``context-N``: N questions about other sections present in the same context.
EXAMPLES = ("none", "general-2", "context-2", "context-5")
#: ``section_id`` of the general-knowledge examples (``fixtures/qa/general_examples.jsonl``).
GENERAL = "general"
MAX_TOKENS = {"plain": 32, "scratchpad": 300}
#: Generation ends at the closing answer tag (an unclosed ``<answer>B`` still reads as B).
STOP = ("</answer>",)


@dataclass(frozen=True)
class Shuffled:
    """A question with its options in shown order and the expected letter."""

    question: Question
    options: tuple[str, ...]
    letter: str

    def letters(self) -> tuple[str, ...]:
        return tuple(LETTERS[: len(self.options)])

    def wrong_letters(self) -> tuple[str, ...]:
        return tuple(x for x in self.letters() if x != self.letter)


def shuffle_options(question: Question, rng: random.Random) -> Shuffled:
    """Options in a seeded random order; the expected letter follows the answer."""
    options = list(question.options)
    rng.shuffle(options)
    return Shuffled(question, tuple(options), LETTERS[options.index(question.answer)])


def format_options(options: Sequence[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))


def example_count(examples: str) -> int:
    return 0 if examples == "none" else int(examples.rsplit("-", 1)[1])


def render_example(item: Shuffled, scratchpad: bool) -> str:
    """One worked example; under the scratchpad prompt a context example shows its quote (which is in the
    documents), a general-knowledge example shows none (no document holds one)."""
    quote = scratchpad and item.question.section_id != GENERAL
    pad = f"<scratchpad>\n\"{item.question.evidence.strip()}\"\n</scratchpad>\n" if quote else ""
    return T.MCQA_EXAMPLE.render(question=item.question.question, options=format_options(item.options),
                                 scratchpad=pad, letter=item.letter)


def build_request(context: str, item: Shuffled, prompt: str, examples: Sequence[Shuffled],
                  scoring: str = "generate") -> Request:
    """The full request for one trial: documents, optional examples, instructions, the question.

    ``scoring="logprob"`` (plain prompts only) prefills ``<answer>`` and asks the backend for the
    log-probability of each option letter instead of generated text.
    """
    if prompt not in PROMPTS:
        raise ValueError(f"prompt must be one of {PROMPTS}, got {prompt!r}")
    scratchpad = prompt == "scratchpad"
    block = ""
    if examples:
        block = T.MCQA_EXAMPLES.render(examples="\n".join(render_example(e, scratchpad) for e in examples))
    instructions = (T.MCQA_SCRATCHPAD_INSTRUCTIONS if scratchpad else T.MCQA_PLAIN_INSTRUCTIONS).render()
    text = T.MCQA.render(context=context, examples=block, instructions=instructions,
                         question=item.question.question, options=format_options(item.options))
    refs = [T.MCQA.ref, (T.MCQA_SCRATCHPAD_INSTRUCTIONS if scratchpad else T.MCQA_PLAIN_INSTRUCTIONS).ref]
    if examples:
        refs += [T.MCQA_EXAMPLES.ref, T.MCQA_EXAMPLE.ref]
    # The documents come first and are the same for every prompt variant of a cell: a prompt-cache prefix.
    shared = shared_prefix_end(text, context)
    if scoring == "logprob" and not scratchpad:
        return Request.user(text, max_tokens=1, template="+".join(refs), prefill="<answer>",
                            choices=tuple(LETTERS[: len(item.options)]), cache_prefix=shared)
    return Request.user(text, max_tokens=MAX_TOKENS[prompt], template="+".join(refs), stop=STOP, cache_prefix=shared)


def ideal_output(letter: str, prompt: str, evidence: str) -> str:
    """What a perfect model would write (used as the fake models' oracle)."""
    if prompt == "scratchpad":
        return f"<scratchpad>\n\"{evidence}\"\n</scratchpad>\n<answer>{letter}</answer>"
    return f"<answer>{letter}</answer>"
