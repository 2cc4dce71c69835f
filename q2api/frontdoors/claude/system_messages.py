"""What `role: "system"` messages inside `messages` ask besides their text. Pure.

Their text becomes labelled context of the user turn where it stands (q2api.conversion.turns);
two fields of theirs change the request itself:

* `clear_at: "next_user_message"`: the message is shown to the model only until a later user
  message exists; after that it stays in the array (clients send it unchanged) but is left out.
  Its content is emptied, never the message removed: every message keeps its index (errors,
  cache breakpoints and conversion checkpoints count by it).
* `output_config.effort`: the effort of the reply that follows it — so the one of the last system
  message that stands after the last assistant message is the request's effort.

The request is never changed in place (messages may be shared with conversion checkpoints).
"""

from __future__ import annotations

import msgspec

from q2api.anthropic.types import MessagesRequest, OutputConfig


def with_system_message_fields(request: MessagesRequest) -> MessagesRequest:
    messages = request.messages
    if not any(message.role == "system" for message in messages):
        return request
    last_user = max((index for index, message in enumerate(messages) if message.role == "user"), default=-1)
    last_assistant = max((index for index, message in enumerate(messages) if message.role == "assistant"), default=-1)
    edited = list(messages)
    effort: str | None = None
    for index, message in enumerate(messages):
        if message.role != "system":
            continue
        if message.clear_at == "next_user_message" and index < last_user and message.content:
            edited[index] = msgspec.structs.replace(message, content=None)
        if index > last_assistant and message.output_config is not None and message.output_config.effort:
            effort = message.output_config.effort
    changes: dict[str, object] = {}
    if edited != messages:
        changes["messages"] = edited
    if effort is not None:
        base = request.output_config or OutputConfig()
        changes["output_config"] = msgspec.structs.replace(base, effort=effort)
    return msgspec.structs.replace(request, **changes) if changes else request
