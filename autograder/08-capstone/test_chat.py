"""Checks for Part 3: the chat template against the GGUF file's own (its Jinja template rendered by the course,
held to transformers' apply_chat_template by the project's tests) on hidden conversations, and the tokenizer: the
student's SmolLM2 pre-tokenizer against the reference, and the student's encoder with SmolLM2's merges and special
tokens, renumbered into SmolLM2's vocabulary, against the real tokenizer rebuilt from the file.

The texts hold what separates SmolLM2's tokenizer from GPT-2's: numbers (every digit apart, and numerics beyond
0-9 such as ², ½ and Arabic-Indic digits, where forgetting the rule changes the ids), a space before a number and
a run of whitespace before one (where GPT-2's pattern run before the digit split cuts the run in two), code and
whitespace runs, other scripts, emoji, contractions, the chat's special tokens. Conversations include messages
with leading and trailing whitespace and blank lines, which the template keeps as they are.
"""

from __future__ import annotations

from conftest import TEMPLATE_RULES, TOKENIZER_RULES
from lmcourse import smollm
from lmcourse.grading.checks import check

CONVERSATIONS = (
    [{"role": "user", "content": "Tell me a joke about owls."}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Where is the treasure?"}],
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Count to 3.\nThen stop."}],
    [{"role": "user", "content": ""}],
    [{"role": "system", "content": "Réponds en français."}, {"role": "user", "content": "¿Qué hora es? 🕒"},
     {"role": "assistant", "content": "Il est 3 h."}],
    # whitespace the template keeps as it is (a template that strips messages passed every conversation above)
    [{"role": "user", "content": "  indented question?  \n"}, {"role": "assistant", "content": "\nAn answer.\n\n"},
     {"role": "user", "content": " and again "}],
)

TEXTS = (
    "Hello 12345 world!  \n\tcode = x+1", "The year 2025: x² + ½ and ٣ and ３", "a 2 b 33 c 444", "In 1969, 384,400 km",
    "def f(x):\n    return x ** 2  # square\n\n\n", "naïve café 日本語 🙂👍🏽 Ελληνικά русский", "I'm they'll WE'VE it's",
    "   leading spaces and trailing   ", "#include <stdio.h>\n## Heading", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
    "<|endoftext|><|im_start|>assistant\n3.14159<|im_end|>", "", " ", "1,000,000.00 $5 €3",
    # whitespace runs before a number: GPT-2's pattern run first splits them differently (issue #40, class 10)
    "a  2", "line\n\n3 items", "x =  7.5", "total:   100%", "items\n 4",
)


@check(points=2, cell="test_chat_prompt", name="chat_prompt: SmolLM2's own chat format on hidden conversations (the "
                                               "default system message, every turn, the assistant's turn opened)")
def test_chat_prompt(student):
    for messages in CONVERSATIONS:
        expected = smollm.chat_prompt(messages)
        found = student.probe("call_many", fn="chat_prompt", each=[{"messages": messages}], **TEMPLATE_RULES)[0]
        if found != expected:
            shown = [m["role"] for m in messages]
            at = next((k for k, (a, b) in enumerate(zip(found, expected)) if a != b), min(len(found), len(expected))) \
                if isinstance(found, str) else 0
            raise AssertionError(f"chat_prompt(a conversation with roles {shown}): differs from SmolLM2's chat format "
                                 f"at character {at}: expected ...{expected[max(0, at - 20):at + 30]!r}; found "
                                 f"...{str(found)[max(0, at - 20):at + 30]!r}")


@check(points=1, cell="test_tokenizer", name="smollm_pretokenize: each numeric character alone, GPT-2's pattern on "
                                             "the text between",
       visibility="visible")
def test_pretokenize(student, reference):
    for text in TEXTS:
        expected = reference.smollm_pretokenize(text)
        found = student.probe("call_many", fn="smollm_pretokenize", each=[{"text": text}], **TOKENIZER_RULES)[0]
        if found != expected:
            raise AssertionError(f"smollm_pretokenize({text!r}): expected {expected}; found {found!r:.300}")


@check(points=2, cell="test_tokenizer", name="smollm_encode with SmolLM2's merges and special tokens: the real "
                                             "tokenizer's ids on varied text (numbers, code, scripts, emoji, chat "
                                             "tokens)")
def test_encode(student):
    model = smollm.smollm2()
    merges, specials = smollm.course_merges(model), model.special_tokens
    real = smollm.hf_tokenizer(model)
    found_all = student.probe("call_many", fn="smollm_encode", each=[{"text": t} for t in TEXTS],
                              common={"merges": list(merges), "special_tokens": list(specials)}, **TOKENIZER_RULES)
    if not isinstance(found_all, list) or len(found_all) != len(TEXTS):
        raise AssertionError(f"smollm_encode on {len(TEXTS)} texts: the grader could not read your results")
    for text, found in zip(TEXTS, found_all):
        expected = real.encode(text).ids
        if not (isinstance(found, list) and all(type(i) is int for i in found)):
            raise AssertionError(f"smollm_encode({text!r}, ...): expected a list of ints; found {found!r:.120}")
        try:
            ids = smollm.to_vocab_ids(found)
        except KeyError as err:
            raise AssertionError(f"smollm_encode({text!r}, ...): id {err} is none of SmolLM2's tokens in the course's "
                                 "numbering (bytes 0-255, merges 256-49155, special tokens after)") from None
        if ids != expected:
            k = next((k for k, (a, b) in enumerate(zip(ids, expected)) if a != b), min(len(ids), len(expected)))
            raise AssertionError(f"smollm_encode({text!r}, ...) renumbered by smollm.to_vocab_ids: expected SmolLM2's "
                                 f"ids {expected}; found {ids} (the first difference at position {k})")
