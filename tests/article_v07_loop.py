# The article's Memora v0.7 program, pasted unchanged except for one thing: the ShortTermMemory class is imported
# from memora instead of defined here. The client is the article's own, ``OpenAI()``: its address and key come from
# OPENAI_BASE_URL and OPENAI_API_KEY, as the SDK reads them.
from openai import OpenAI

from memora import ShortTermMemory

client = OpenAI()

MODEL = "gpt-5-mini"

SYSTEM_PROMPT = """
You are Memora, a personal English learning assistant.

Your goal is to help the user learn English clearly and efficiently.

Guidelines:
- Explain concepts in simple language.
- Keep answers focused on the user's question.
- Use short examples when helpful.
- Avoid unnecessary technical grammar terminology.
"""

SUMMARY_INSTRUCTIONS = """
You maintain a compact summary of an ongoing conversation.

Requirements:
- Merge the existing summary with the new messages.
- Preserve user facts, preferences, goals, corrections,
  decisions, and unresolved questions.
- Remove greetings, repetition, and unimportant wording.
- Do not invent information.
- If newer information corrects older information,
  keep the newer information.
- Keep the summary under 150 words.
- Use the same language as the conversation when possible.
- Return only the updated summary.
"""

# 這是 Memora 自己設定的 Input Budget，
# 不是模型真正的最大 Context Window。
MAX_INPUT_TOKENS = 1000

# 優先保留最近三輪的原始 User / Assistant Message。
MAX_RECENT_TURNS = 3


def print_messages(title, messages):
    print(f"\n--- {title} ---")

    if not messages:
        print("(empty)")
    else:
        for message in messages:
            print(f"{message['role']}: {message['content']}")

    print("----------------------------")


memory = ShortTermMemory(
    client=client,
    model=MODEL,
    system_prompt=SYSTEM_PROMPT,
    summary_instructions=SUMMARY_INSTRUCTIONS,
    max_input_tokens=MAX_INPUT_TOKENS,
    max_recent_turns=MAX_RECENT_TURNS,
)

print("Memora v0.7")
print("Commands: history, context, summary, status, exit")

while True:
    user_input = input("\nYou: ")
    command = user_input.lower().strip()

    if command == "exit":
        print("Bye!")
        break

    if command == "history":
        print_messages("Full Conversation History", memory.history)
        continue

    if command == "context":
        print_messages("Last Request Context", memory.last_context)
        continue

    if command == "summary":
        print("\n--- Conversation Summary ---")
        print(memory.summary or "(empty)")
        print("----------------------------")
        continue

    if command == "status":
        print("\n--- Short-term Memory Status ---")

        for name, value in memory.get_status().items():
            print(f"{name}: {value}")

        print("--------------------------------")
        continue

    memory.add_user_message(user_input)

    try:
        memory_stats = memory.prepare_context()

        response = client.responses.create(model=MODEL, instructions=SYSTEM_PROMPT, input=memory_stats["context_messages"])

    except Exception as error:
        memory.rollback_last_user_message()
        print("Request failed:", error)
        continue

    assistant_reply = response.output_text

    memory.finish_turn(
        assistant_reply=assistant_reply, context_messages=memory_stats["context_messages"], response_tokens=response.usage.total_tokens
    )

    print("Memora:", assistant_reply)

    print("\n--- Memory Status ---")
    print("Newly summarized messages:", memory_stats["newly_summarized_count"])
    print("Context messages sent:", len(memory_stats["context_messages"]))
    print("Counted input tokens:", memory_stats["input_tokens"])
    print("Actual input tokens:", response.usage.input_tokens)
    print("Output tokens:", response.usage.output_tokens)
    print("Summary update tokens:", memory_stats["summary_token_usage"])
    print("Session total tokens:", memory.session_total_tokens)
    print("---------------------")
