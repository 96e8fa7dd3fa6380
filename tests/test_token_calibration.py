"""The local count's framing constants against the figures OpenAI has published.

The cookbook "How to count tokens with tiktoken" checks its formula against the API for
gpt-4o and gpt-4o-mini with one six-message example: 124 prompt tokens counted, 124 billed.
Its messages carry ``name`` fields, which add the name's tokens plus one; Memora never
sends names, so the test adds those itself and the rest is Memora's own count.
"""

from memora.text.messages import Message
from memora.text.tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, LocalTokenCounter, count_message, count_text

COOKBOOK_EXAMPLE = [
    ("system", None, "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
    ("system", "example_user", "New synergies will help drive top-line growth."),
    ("system", "example_assistant", "Things working well together will increase revenue."),
    ("system", "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."),
    ("system", "example_assistant", "Let's talk later when we're less busy about how to do better."),
    ("user", None, "This late pivot means we don't have time to boil the ocean for the client deliverable."),
]
COOKBOOK_BILLED_GPT_4O = 124
TOKENS_PER_NAME = 1


def test_framing_reproduces_the_cookbooks_billed_count_for_gpt_4o() -> None:
    names = sum(count_text(name) + TOKENS_PER_NAME for _, name, _ in COOKBOOK_EXAMPLE if name)
    messages = sum(count_message(role, content) for role, _, content in COOKBOOK_EXAMPLE)
    assert messages + names + REPLY_PRIMING_TOKENS == COOKBOOK_BILLED_GPT_4O


def test_instructions_count_as_one_leading_system_message() -> None:
    counter = LocalTokenCounter()
    messages = [Message("user", "Say hello world")]
    as_instructions = counter.count("gpt-5-mini", "Finish the given task", messages)
    as_message = counter.count("gpt-5-mini", "", [Message("system", "Finish the given task"), *messages])
    assert (
        as_instructions
        == as_message
        == (2 * TOKENS_PER_MESSAGE + 2 + count_text("Finish the given task") + count_text("Say hello world") + REPLY_PRIMING_TOKENS)
    )
