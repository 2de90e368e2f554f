"""What breaks today's models, on your own documents: unanswerable items, distractors, low-overlap questions.

Each condition pairs within items: sample i asks one item in every cell of its test, in a context of the whole
budget built once for the item (the answer document at a seeded boundary), and the cells differ only by the knob.

* **Unanswerable** (``answer_doc``: present / removed): the same context with the answer document taken out; the
  prompt (in both cells) allows "Not in the documents."; right there is abstaining. The removed cell's error rate
  is the hallucination rate.
* **Distractors** (``distractors``: 0 / 1 / 4): the item's hand-written distractor sentences (they share the
  question's words and answer a near question) inserted at seeded sentence boundaries of other documents; the
  context is built 4 distractors short of the budget so that every count fits. On a miss the trial records which
  distractor's answer it gave.
* **Low overlap** (``question_form``: literal / low-overlap): the item's reviewed paraphrase, which shares few
  content words with its answer passage (:mod:`.overlap`), asked instead of the literal question.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace

from pytest_longctx import Request
from pytest_longctx.context.haystack import Unit
from pytest_longctx.experiments.docs import haystack
from pytest_longctx.experiments.docs.qa_file import USABLE, QAItem
from pytest_longctx.experiments.docs.retrieval import sentence_spans
from pytest_longctx.experiments.docs.scorers import normalize_answer

ANSWER_DOC = ("present", "removed")
DISTRACTOR_COUNTS = (0, 1, 4)
QUESTION_FORMS = ("literal", "low-overlap")
ABSTAIN_REPLY = "Not in the documents."
ABSTAIN_TEMPLATE = "docs-answer-abstain@1"
ABSTAIN_PROMPT = """Answer the question using only the documents below. They may not contain the answer.

{context}

Question: {question}
Answer with a short phrase from the documents, on one line, and nothing else. If the documents do not answer the \
question, reply: """ + ABSTAIN_REPLY
#: Replies that say the answer is not there (normalized, matched as word-aligned parts of the reply).
_ABSTAIN = re.compile(r"\b(not in the documents?|not (?:mentioned|stated|given|provided|specified|found|included|"
                      r"present|available)|no (?:information|mention|answer)|(?:does|do) not (?:say|mention|state|"
                      r"contain|specify|provide)|cannot be (?:found|determined|answered)|can ?not (?:find|answer)|"
                      r"(?:don ?t|do not) know|unknown|not answered)\b")


def abstained(answer: str) -> bool:
    """Whether a reply says the documents do not hold the answer (the first line, normalized)."""
    line = next((ln for ln in answer.splitlines() if ln.strip()), "")
    return bool(_ABSTAIN.search(" ".join(re.sub(r"[^\w\s]", " ", line.lower()).split())))


def abstain_request(question: str, context: str) -> Request:
    return Request.user(ABSTAIN_PROMPT.format(context=context, question=question), max_tokens=48,
                        template=ABSTAIN_TEMPLATE)


def with_distractors(items: Sequence[QAItem]) -> list[QAItem]:
    """Items the distractor condition can ask: at least the largest count of distractors."""
    return [it for it in items if len(it.distractors) >= max(DISTRACTOR_COUNTS)]


def with_paraphrase(items: Sequence[QAItem], review: str) -> list[QAItem]:
    """Items the low-overlap condition can ask: a paraphrase whose own review state is usable under ``review``."""
    return [it for it in items if it.paraphrase is not None and it.paraphrase.status in USABLE[review]]


def pick(items: Sequence[QAItem], sample: int, seed: int, kind: str) -> QAItem:
    """The item sample ``sample`` asks in every cell of one condition (a seeded order of ``items``)."""
    order = sorted(items, key=lambda it: it.id)
    random.Random(f"docs-{kind}|{seed}").shuffle(order)
    return order[sample % len(order)]


def without_answer(stack: haystack.Stack) -> str:
    """The context with the answer document taken out: the other documents, in the same order."""
    return haystack.SEPARATOR.join(u.text for u in stack.fillers)


def removed_detail(stack: haystack.Stack) -> dict[str, object]:
    """What a trial records about the context without its answer document."""
    return {"context_tokens": stack.tokens - stack.gold.tokens - (stack.separator if stack.fillers else 0),
            "n_docs": len(stack.fillers), "removed_doc": stack.answer_doc}


def insert(stack: haystack.Stack, item: QAItem, count: int, tokens: dict[str, int],
           rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """The context with the item's first ``count`` distractors, each at a seeded sentence boundary of a filler
    document (distractor j goes to the same place whatever the count), and where each went."""
    fillers = [i for i in range(len(stack.units)) if i != stack.gold_index]
    places = [(fillers[rng.randrange(len(fillers))] if fillers else stack.gold_index, rng.random(), distractor)
              for distractor in item.distractors[:max(DISTRACTOR_COUNTS)]]
    units = list(stack.units)
    where: list[dict[str, object]] = []
    for j, (index, at, distractor) in enumerate(places[:count]):
        old = units[index]
        spans = sentence_spans(old.text)
        cut = spans[min(int(at * len(spans)), len(spans) - 1)][1] if spans else len(old.text)
        text = f"{old.text[:cut]} {distractor.text}{old.text[cut:]}"
        units[index] = Unit(old.id, text, old.tokens + tokens.get(distractor.text, 0) + 1)
        where.append({"distractor": j, "doc": old.id})
    built = replace(stack, units=tuple(units))
    return haystack.render(built), where


def answered_distractor(answer: str, item: QAItem, count: int) -> int | None:
    """Which inserted distractor's answer a reply gives (its index), or None."""
    reply = f" {normalize_answer(answer)} "
    for j, distractor in enumerate(item.distractors[:count]):
        wanted = normalize_answer(distractor.answer)
        if wanted and f" {wanted} " in reply:
            return j
    return None


def distractor_tokens(item: QAItem, tokens: dict[str, int]) -> int:
    """Tokens the largest count of the item's distractors adds (each sentence and a space)."""
    return sum(tokens.get(d.text, 0) + 1 for d in item.distractors[:max(DISTRACTOR_COUNTS)])
