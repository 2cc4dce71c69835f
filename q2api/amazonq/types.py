"""The Amazon Q `GenerateAssistantResponse` request body, as TypedDicts, and its field limits.

Shapes and constraints follow docs/protocol.md#request-body. The body is built as plain dicts (it goes
straight to orjson); these types document it and let a type checker follow it. Optional
members are `NotRequired`: absent optional fields are omitted, never sent as `null`
(docs/protocol.md#json-encoding-rules).
"""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, TypedDict, final

# ---------------------------------------------------------------- limits (docs/protocol.md#request-body)

MAX_TOOL_NAME_LENGTH = 64
MAX_TOOL_USE_ID_LENGTH = 64
# Tool names and tool-use ids: 1..64 characters of this alphabet.
IDENTIFIER_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_TOOL_DESCRIPTION_LENGTH = 10_240
MAX_IMAGES_PER_MESSAGE = 10
MAX_IMAGE_BYTES = 10_000_000
# The service rejects user messages over ~600,000 characters (the Q CLI's "actual service limit").
MAX_USER_MESSAGE_CHARS = 600_000
MAX_CONVERSATION_ID_LENGTH = 128
MODEL_ID_PATTERN = re.compile(r"[a-zA-Z0-9_:.-]{1,1024}")
IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})

ORIGIN_AI_EDITOR = "AI_EDITOR"
CHAT_TRIGGER_MANUAL: Literal["MANUAL"] = "MANUAL"

JSONDocument = Any  # an inline JSON value (object for schemas and tool inputs)

# ---------------------------------------------------------------- shapes

ImageFormat = Literal["png", "jpeg", "gif", "webp"]


class ImageSource(TypedDict):
    bytes: str  # base64


class ImageBlock(TypedDict):
    format: ImageFormat
    source: ImageSource


class ToolResultContentBlock(TypedDict, total=False):
    text: str
    json: JSONDocument


class ToolResult(TypedDict):
    toolUseId: str
    content: list[ToolResultContentBlock]
    status: NotRequired[Literal["success", "error"]]


class ToolInputSchema(TypedDict):
    json: JSONDocument


class ToolSpecification(TypedDict):
    name: str
    description: str
    inputSchema: ToolInputSchema


class CachePoint(TypedDict):
    type: Literal["default"]  # the only value (docs/protocol.md#prompt-caching-and-metering)


class Tool(TypedDict, total=False):
    """A union: exactly one of the two keys."""

    toolSpecification: ToolSpecification
    cachePoint: CachePoint


class UserInputMessageContext(TypedDict, total=False):
    toolResults: list[ToolResult]
    tools: list[Tool]  # only on the current message


class UserInputMessage(TypedDict):
    content: str
    userInputMessageContext: NotRequired[UserInputMessageContext]
    origin: NotRequired[str]
    images: NotRequired[list[ImageBlock]]
    modelId: NotRequired[str]  # only on the current message
    cachePoint: NotRequired[CachePoint]


class ToolUse(TypedDict):
    toolUseId: str
    name: str
    input: dict[str, JSONDocument]  # an object, not a JSON string


class ReasoningText(TypedDict):
    text: str
    signature: NotRequired[str]


class ReasoningContent(TypedDict, total=False):
    """A union (docs/protocol.md#native-thinking): signed reasoning text, or the encrypted reasoning of a model that redacts it."""

    reasoningText: ReasoningText
    redactedContent: str  # base64


class AssistantResponseMessage(TypedDict):
    content: str
    messageId: NotRequired[str]
    toolUses: NotRequired[list[ToolUse]]
    reasoningContent: NotRequired[ReasoningContent]
    cachePoint: NotRequired[CachePoint]


@final  # lets `"userInputMessage" in message` tell the two kinds apart for the type checker
class UserChatMessage(TypedDict):
    userInputMessage: UserInputMessage


@final
class AssistantChatMessage(TypedDict):
    assistantResponseMessage: AssistantResponseMessage


ChatMessage = UserChatMessage | AssistantChatMessage


class ConversationState(TypedDict):
    conversationId: NotRequired[str]
    chatTriggerType: Literal["MANUAL", "DIAGNOSTIC", "INLINE_CHAT"]
    history: NotRequired[list[ChatMessage]]
    currentMessage: UserChatMessage
    agentTaskType: NotRequired[Literal["vibe", "spectask"]]


class GenerateAssistantResponseRequest(TypedDict):
    conversationState: ConversationState
    profileArn: NotRequired[str]  # added by the upstream client
    # Native reasoning switches, checked by the service against the model's
    # `additionalModelRequestFieldsSchema` (docs/protocol.md#native-thinking).
    additionalModelRequestFields: NotRequired[dict[str, JSONDocument]]
