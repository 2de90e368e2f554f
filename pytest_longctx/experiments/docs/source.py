"""The docs experiment's source protocol (``--longctx-protocol source``): Snorkel's long-context
evaluation on your own documents, as its methodology write-up describes it
(``../shared/seeds/003_ccebb67fa7538b2d.txt``).

* Task generation: one factoid QA pair per document, with the write-up's prompt word for word
  ("1. Task Generation"); the reply is one JSON object with keys 'question' and 'answer'.
* Evaluating responses: an LLM judge with the write-up's prompt word for word ("4. Evaluating
  responses") is the scorer.
* Depths 0/25/50/75/100 % and context sizes 0/25/50/75/100 % ("Additional Notes" 3 and 4), every
  QA pair at every depth and size.

The write-up does not state the prompt that asks the model the question; :data:`ANSWER` is ours,
in the field layout of its two stated prompts (``Context:``, ``Question:``, then the field to fill).
"""

from __future__ import annotations

from pytest_longctx import Request
from pytest_longctx.templates import Template

# Source: 003_ccebb67fa7538b2d.txt, "### 1. Task Generation" (word for word).
GENERATE = Template("docs-source-generate", 1, """\
Ask a factoid question given only the context provided, that can be answered in a few words. Answer the question \
given the context.
Format your result in a JSON object with keys 'question' and 'answer'.
Context: {context}
Result:""")

# Source: 003_ccebb67fa7538b2d.txt, "### 4. Evaluating responses" (word for word).
JUDGE = Template("docs-source-judge", 1, """\
For the question provided, return a JSON object with a `correct` key as a boolean, if the given answer and gold \
standard answer are the same in meaning (may be worded differently).
Question: {question}
Answer: {answer}
Gold standard answer: {gold_answer}
JSON:""")

# Not in the source (see the module docstring): ours, in the layout of the source's prompts.
ANSWER = Template("docs-source-answer", 1, """\
Using only the context provided, answer the question in a few words.
Context: {context}
Question: {question}
Answer:""")

#: Pairs generated per document ("Currently only 1 QA pair is generated per document").
PAIRS_PER_DOC = 1
#: Output lengths (the write-up states none): a few words, one JSON object.
ANSWER_MAX_TOKENS = 48
JUDGE_MAX_TOKENS = 32
GENERATE_MAX_TOKENS = 256
#: Document separator in a source-protocol context (documents are joined as plain text).
SEPARATOR = "\n\n"
TEMPLATES = (GENERATE, JUDGE, ANSWER)


def generation_request(text: str) -> Request:
    return Request.user(GENERATE.render(context=text), max_tokens=GENERATE_MAX_TOKENS, template=GENERATE.ref)


def judge_request(question: str, gold: str, answer: str) -> Request:
    return Request.user(JUDGE.render(question=question, answer=answer, gold_answer=gold),
                        max_tokens=JUDGE_MAX_TOKENS, template=JUDGE.ref)


def answer_request(question: str, context: str) -> Request:
    return Request.user(ANSWER.render(context=context, question=question), max_tokens=ANSWER_MAX_TOKENS,
                        template=ANSWER.ref)
