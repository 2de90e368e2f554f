"""The QA study's protocol (``--longctx-protocol source``): its prompts, collage layout, output length, parsing.

Source: ``../shared/seeds/000_4740b4a9b98693a5.txt`` (Anthropic's long-context QA cookbook notebook); the cell
each rule comes from is named beside it. Kept from the source: prompt wording (see :mod:`.source_prompts`), the
option list as the source formatted it (the Python list ``['A. ...', 'B. ...']``: ``str.format`` of
``randomized_answers``, In [14]/[15]), the separator of the collage, the "middle" as chunk index 20, examples
shown as question, answers and the correct letter, ``max_tokens`` 3000 with the completion API's stop
sequences (In [6]) and ``extract_answer`` (In [9]). Not kept: the duplicated relevant chunk of the "beginning"
case (In [28]) and the source's under-filled budgets (see README, "Reproducing the sources").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_longctx import Request, shared_prefix_end
from pytest_longctx.context import haystack
from pytest_longctx.context.haystack import Haystack, Unit
from pytest_longctx.experiments.qa import source_prompts as P
from pytest_longctx.experiments.qa.mcqa import Shuffled
from pytest_longctx.experiments.qa.scoring import LETTERS
from pytest_longctx.templates import Template

#: ``'\n\n\n\n'.join(chunks_ctx_ordered)``, In [28] ``create_long_context``.
SEPARATOR = "\n\n\n\n"
#: The study's budgets, In [28] (``max_tokens=70000``, "Can also use 95000").
BUDGETS = (70_000, 95_000)
#: ``main_chunk_idx=20`` for "middle", In [29]: ``chunks_ctx[1:20] + [chunk] + ...`` puts 19 chunks before it.
MIDDLE_INDEX = 20
#: ``get_completion``, In [6]: ``max_tokens_to_sample=3000``, temperature 0, these stop sequences.
MAX_TOKENS = 3000
STOP = ("\n\nHuman:", "\n\nAssistant:")
_HUMAN = "\n\nHuman: "
_ASSISTANT = "\n\nAssistant:"


def format_answers(item: Shuffled) -> str:
    """The option list as the source put it in the prompt: ``str`` of the list ``['A. ...', 'B. ...', ...]``."""
    return str([f"{LETTERS[i]}. {opt}" for i, opt in enumerate(item.options)])


def to_request(prompt: str, template: str, shared: str = "") -> Request:
    """A ``\\n\\nHuman: ...\\n\\nAssistant: ...`` completion prompt as a user turn plus an optional prefill.

    ``shared``: the text that ends the prompt's part every variant has in common (its government record), marked
    as a prompt-cache prefix.
    """
    at = prompt.rfind(_ASSISTANT)
    if not prompt.startswith(_HUMAN) or at < len(_HUMAN):
        raise ValueError("not a Human:/Assistant: prompt")
    human, prefill = prompt[len(_HUMAN):at], prompt[at + len(_ASSISTANT):].strip() or None  # one copy of a long text
    return Request.user(human, max_tokens=MAX_TOKENS, stop=STOP, prefill=prefill, template=template,
                        cache_prefix=shared_prefix_end(human, shared))


def _example_section(examples: Sequence[Shuffled]) -> str:
    """In [54]/[56]: each example's question, its answers as the source formats them, and the correct letter."""
    return P.EXAMPLES_INTRO + "".join(
        P.EXAMPLE_BLOCK.render(sample_question=e.question.question, sample_answers=format_answers(e),
                               correct_answer=e.letter) for e in examples)


def template_for(prompt: str, examples: str) -> Template:
    """The source's template of one prompt variant (``prompt`` plain/scratchpad × ``examples``)."""
    scratchpad = prompt == "scratchpad"
    if examples == "none":
        return P.ONE_CHUNK_SCRATCHPAD if scratchpad else P.ONE_CHUNK
    if examples.startswith("general"):
        return P.NONGOV_EXAMPLES_SCRATCHPAD if scratchpad else P.NONGOV_EXAMPLES
    return P.CONTEXT_EXAMPLES_SCRATCHPAD if scratchpad else P.CONTEXT_EXAMPLES


def build_request(context: str, item: Shuffled, prompt: str, examples: str,
                  shots: Sequence[Shuffled] = ()) -> Request:
    """The full request of one trial under the source protocol."""
    template = template_for(prompt, examples)
    values = {"chunk": context, "question": item.question.question, "answers": format_answers(item)}
    refs = [template.ref]
    if examples.startswith("context"):
        values["examples_section"] = _example_section(shots)
        refs.append(P.EXAMPLE_BLOCK.ref)
    return to_request(template.render(**values), "+".join(refs), shared=context)


def _between(tag: str, text: str) -> list[str]:
    """``extract_between_tags`` (In [9]) with ``strip=True, alt=True``."""
    found = [e.strip() for e in re.findall(rf"<{tag}\s?>(.+?)</{tag}\s?>", text, re.DOTALL)]
    if not found:
        found = [e.strip() for e in re.findall(rf"<{tag}\s?>(.+?)<{tag}\s?>", text, re.DOTALL)]
    return found


def parse_answer(completion: str) -> str:
    """``extract_answer`` (In [9]): first character of the first ``<Answer>`` tag, else ``_``.

    The source compares this character with the correct letter as is (a lowercase ``b`` is wrong).
    An empty tag, which would crash the source, reads as ``_``.
    """
    for text in (completion, completion + "</Answer>"):
        found = _between("Answer", text)
        if found:
            return found[0][:1] or "_"
    return "_"


def ideal_output(letter: str, prompt: str, evidence: str) -> str:
    """What a perfect model would write under the source prompts (the fake models' oracle)."""
    if prompt == "scratchpad":
        return f"<scratchpad>\n{evidence}\n</scratchpad>\n<Answer>{letter}</Answer>"
    return f"\n<Answer>\n{letter}\n</Answer>"


@dataclass(frozen=True)
class Layout:
    """Where the relevant chunk goes among ``n`` other chunks, as the source places it (In [29])."""

    position: str

    def index(self, n_others: int) -> int:
        if self.position == "beginning":
            return 0  # the source's chunks_ctx[1:0] + [chunk] + chunks_ctx[0:] shows it twice; once here
        if self.position == "middle":
            return min(MIDDLE_INDEX - 1, n_others)
        if self.position == "end":
            return n_others
        raise ValueError(f"source positions are beginning, middle and end, not {self.position!r}")


def place(gold: Unit, fillers: Sequence[Unit], position: str) -> Haystack:
    """Put ``gold`` among ``fillers`` at the source's chunk index for ``position`` (the core builder's index
    placement; the depth it lands at is recorded as for any other collage)."""
    return haystack.place(gold, fillers, Layout(position).index(len(fillers)))


def render(collage: Haystack) -> str:
    """The source's collage text: raw chunks joined by four newlines (In [28])."""
    return haystack.render(collage, SEPARATOR)
