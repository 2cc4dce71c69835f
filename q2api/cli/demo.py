"""`q2api demo`: the whole pipeline on loopback, against a SIMULATED Amazon Q.

The real gateway (the same Starlette app and uvicorn server `q2api serve`
runs) is started on 127.0.0.1 in front of the built-in simulated upstream,
and the official `anthropic` SDK talks to it: a streamed text reply, then a
streamed tool call; then the official `openai` SDK streams a chat completion
through the OpenAI front door, and holds a two-turn Responses API conversation
(`POST /v1/responses` streamed, then continued with `previous_response_id`) —
both skipped, saying so, when `openai` is not installed. Nothing here reads the
user's environment or `.env` for settings, and no byte leaves the machine.

`q2api demo --serve` keeps the same simulated gateway running until Ctrl-C instead, and prints
the `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` lines (and the run's client key) to paste into the
shell of a real client — Claude Code, an SDK — Codex's `config.toml` (Codex reads no
`OPENAI_BASE_URL`), and the console's address with its admin key. The simulated upstream answers every request by echoing its last user message.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
import tempfile
import threading
from typing import Any

from q2api.server.logging_setup import configure_logging
from q2api.settings import load_settings
from q2api.testing import scripts
from q2api.testing.gateway_server import GatewayThread
from q2api.testing.simulated_upstream import SimulatedUpstream

DEMO_MODEL = "claude-sonnet-5-5"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
DEMO_SERVE_PORT = 8000  # `--serve`'s port unless told: the one `q2api serve` and the README use

BANNER = """\
q2api demo -- the Amazon Q upstream in this demo is SIMULATED.
No Amazon Q account is used and nothing leaves this machine: the gateway and a
scripted stand-in for Amazon Q both listen on 127.0.0.1 only.
"""
# The official SDKs the demo drives the gateway with are an extra, not a runtime dependency.
MISSING_EXTRA = (
    "q2api demo: the `demo` extra (the official anthropic and openai SDKs) is not installed; "
    'install it with: pip install "q2api[demo]" (from a clone: pip install -e ".[demo]")'
)

GREETING = (
    "Hello from q2api! Your request went through the real gateway: it was converted to an Amazon Q "
    "GenerateAssistantResponse call, the simulated upstream answered with AWS event-stream frames, "
    "and the gateway translated them back into Claude server-sent events as they arrived."
)
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
}
WEATHER_CALL = {"city": "Paris", "unit": "celsius"}
RESPONSES_GREETING = (
    "Hello from q2api's Responses door, the API Codex and the OpenAI Agents SDK speak: your input became the "
    "same Claude request, and the reply came back as response.* events."
)
RESPONSES_FOLLOW_UP = "Your first question was stored with its answer, so this turn saw both."
OPENAI_GREETING = (
    "Hello from q2api's OpenAI front door! Your chat completion was translated to the same Claude request, "
    "went through the same conversion and the same simulated Amazon Q, and came back as chat.completion.chunk events."
)


def run_demo() -> int:
    try:
        import anthropic
    except ImportError:
        print(MISSING_EXTRA, file=sys.stderr)
        return 1
    print(BANNER, flush=True)
    # Quiet logs: the demo's output is the conversation, not the gateway's request log.
    configure_logging("WARNING", "text")
    _bypass_proxies_for_loopback()
    try:
        with tempfile.TemporaryDirectory(prefix="q2api-demo-") as data_dir:
            return _run(anthropic, data_dir)
    except KeyboardInterrupt:
        print("\nq2api demo: interrupted.", file=sys.stderr)
        return 130
    except anthropic.APIStatusError as exc:
        print(f"\nq2api demo failed: the gateway answered with an error: {exc}", file=sys.stderr)
        return 1
    except anthropic.APIError as exc:  # connection failures, timeouts, broken streams
        print(f"\nq2api demo failed: the request did not complete: {exc}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:
        print(f"\nq2api demo failed: {exc}", file=sys.stderr)
        return 1


SERVE_BANNER = """\
q2api demo --serve -- the Amazon Q upstream behind this gateway is SIMULATED: it answers every
request by echoing the last user message. No Amazon Q account is used and nothing leaves this
machine: the gateway and the simulator listen on 127.0.0.1 only.
"""


def serve_demo(port: int | None) -> int:
    """The simulated upstream behind a real gateway on 127.0.0.1:`port` until Ctrl-C (then exit 0)."""
    port = DEMO_SERVE_PORT if port is None else port
    print(SERVE_BANNER, flush=True)
    # The request log is what there is to watch here: one INFO line per request, on stderr.
    configure_logging("INFO", "text")
    _bypass_proxies_for_loopback()
    client_key = "demo-" + secrets.token_urlsafe(16)
    admin_key = "demo-admin-" + secrets.token_urlsafe(16)
    try:
        with contextlib.ExitStack() as running:
            data_dir = running.enter_context(tempfile.TemporaryDirectory(prefix="q2api-demo-"))
            upstream = running.enter_context(SimulatedUpstream.run_in_thread())
            settings = load_settings(
                {
                    **upstream.env(),
                    "Q2API_DATA_DIR": data_dir,
                    "Q2API_API_KEYS": client_key,
                    "Q2API_ADMIN_KEY": admin_key,
                },
                env_file=None,
            )
            try:
                gateway = running.enter_context(GatewayThread(settings, port=port))
            except RuntimeError:
                print(
                    f"q2api demo: the gateway could not listen on 127.0.0.1:{port}; is the port in use? "
                    "Choose another with --port.",
                    file=sys.stderr,
                )
                return 1
            print(_paste_lines(gateway.base_url, client_key, admin_key), flush=True)
            # Stopped by a service manager or `kill` like Ctrl-C: the gateway and simulator stop, the data goes.
            signal.signal(signal.SIGTERM, _interrupt)
            threading.Event().wait()  # until Ctrl-C
    except KeyboardInterrupt:
        print("\nq2api demo: stopped.", file=sys.stderr)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


CODEX_KEY_VARIABLE = "Q2API_KEY"


def codex_config(base_url: str) -> str:
    """Codex's `config.toml` for the gateway at `base_url` (the README's recipe): Codex reads no
    `OPENAI_BASE_URL`, only a model provider, and left alone it also reaches OpenAI's update check,
    analytics and plugin marketplaces, which the first lines turn off."""
    return f"""\
model = "{DEMO_MODEL}"
model_provider = "q2api"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.q2api]
name = "q2api"
base_url = "{base_url}/v1"
env_key = "{CODEX_KEY_VARIABLE}"
wire_api = "responses"
"""


def _paste_lines(base_url: str, client_key: str, admin_key: str) -> str:
    return f"""\
Gateway: {base_url}  (a random client key for this run)

Paste into the shell of a client (Claude Code, the anthropic SDK):
  export ANTHROPIC_BASE_URL={base_url}
  export ANTHROPIC_API_KEY={client_key}

or of an OpenAI SDK client (the openai SDK, the Agents SDK):
  export OPENAI_BASE_URL={base_url}/v1
  export OPENAI_API_KEY={client_key}

Codex reads no OPENAI_BASE_URL: give it this as ~/.codex/config.toml (or the config.toml of a
CODEX_HOME of its own),
--- config.toml ---
{codex_config(base_url)}---
and its key in the shell you run it from:
  export {CODEX_KEY_VARIABLE}={client_key}

Console: {base_url}/console  (admin key: {admin_key})

Press Ctrl-C to stop.
"""


def _run(anthropic: Any, data_dir: str) -> int:
    client_key = "demo-" + secrets.token_urlsafe(16)
    with SimulatedUpstream.run_in_thread() as upstream:
        upstream.enqueue(
            scripts.text_reply(GREETING, chunks=16, delay=0.05),
            scripts.tool_reply("get_weather", WEATHER_CALL, text_before="Let me look that up.", delay=0.05),
            scripts.text_reply(OPENAI_GREETING, chunks=16, delay=0.05),
            scripts.text_reply(RESPONSES_GREETING, chunks=16, delay=0.05),
            scripts.text_reply(RESPONSES_FOLLOW_UP, chunks=8, delay=0.05),
        )
        # Only the simulator's variables: never the user's environment, `.env` or real account.
        settings = load_settings(
            {
                **upstream.env(),
                "Q2API_DATA_DIR": data_dir,
                "Q2API_API_KEYS": client_key,
                "Q2API_LOG_LEVEL": "WARNING",
            },
            env_file=None,
        )
        with GatewayThread(settings) as gateway:
            print(f"Simulated Amazon Q upstream: {upstream.url}")
            print(f"Gateway:                     {gateway.base_url}  (a random client key for this run)\n")
            client = anthropic.Anthropic(base_url=gateway.base_url, api_key=client_key, max_retries=0, timeout=30.0)
            models = [model.id for model in client.models.list(limit=100)]
            print(f"Models (the simulated account's ListAvailableModels catalogue): {', '.join(models)}\n")
            _stream_text(client)
            _stream_tool_call(client)
            _stream_chat_completion(gateway.base_url, client_key)
            _responses_conversation(gateway.base_url, client_key)
    print("\nDone. Run `q2api serve` with an Amazon Q account configured to use the real thing.")
    return 0


def _stream_text(client: Any) -> None:
    prompt = "Say hello and tell me what just happened to this request."
    print(f"1) Streaming request ({DEMO_MODEL}): {prompt!r}\n")
    with client.messages.stream(
        model=DEMO_MODEL, max_tokens=512, messages=[{"role": "user", "content": prompt}]
    ) as stream:
        for text in stream.text_stream:
            print(text, end="", flush=True)
        message = stream.get_final_message()
    print("\n")
    _print_summary(message)


def _stream_tool_call(client: Any) -> None:
    prompt = "What's the weather in Paris?"
    print(f"\n2) Streaming request with a tool ({WEATHER_TOOL['name']}): {prompt!r}\n")
    with client.messages.stream(
        model=DEMO_MODEL,
        max_tokens=512,
        tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": prompt}],
    ) as stream:
        for text in stream.text_stream:
            print(text, end="", flush=True)
        message = stream.get_final_message()
    print()
    for block in message.content:
        if block.type == "tool_use":
            print(f"[tool_use] {block.name}({json.dumps(block.input)})  id={block.id}")
    print()
    _print_summary(message)


def _stream_chat_completion(base_url: str, client_key: str) -> None:
    prompt = "Say hello through the OpenAI API."
    print(f"\n3) OpenAI Chat Completions, streamed (POST /v1/chat/completions): {prompt!r}\n")
    try:
        import openai
    except ImportError:
        print("   skipped: the `openai` package is not installed (it comes with the `demo` extra).")
        return
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=client_key, max_retries=0, timeout=30.0)
    finish_reason, usage = None, None
    try:
        stream = client.chat.completions.create(
            model=DEMO_MODEL,
            messages=[{"role": "user", "content": prompt}],
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.choices:
                print(chunk.choices[0].delta.content or "", end="", flush=True)
                finish_reason = chunk.choices[0].finish_reason or finish_reason
            usage = chunk.usage or usage
    except openai.APIError as exc:
        raise RuntimeError(f"the OpenAI door answered with an error: {exc}") from None
    print("\n")
    print(f"   finish_reason: {finish_reason}")
    if usage is not None:
        print(f"   usage:         prompt_tokens={usage.prompt_tokens} completion_tokens={usage.completion_tokens}")


def _responses_conversation(base_url: str, client_key: str) -> None:
    prompt = "Say hello through the Responses API."
    print(f"\n4) OpenAI Responses API, streamed (POST /v1/responses): {prompt!r}\n")
    try:
        import openai
    except ImportError:
        print("   skipped: the `openai` package is not installed (it comes with the `demo` extra).")
        return
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=client_key, max_retries=0, timeout=30.0)
    try:
        with client.responses.stream(model=DEMO_MODEL, input=prompt) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    print(event.delta, end="", flush=True)
            first = stream.get_final_response()
        print("\n")
        print(f"   response: {first.id}  status={first.status}")
        follow_up = "What did I just ask?"
        print(f"\n   Continued with previous_response_id={first.id}: {follow_up!r}\n")
        second = client.responses.create(model=DEMO_MODEL, input=follow_up, previous_response_id=first.id)
    except openai.APIError as exc:
        raise RuntimeError(f"the Responses door answered with an error: {exc}") from None
    print(f"   {second.output_text}\n")
    usage = second.usage
    print(f"   status: {second.status}")
    if usage is not None:
        print(f"   usage:  input_tokens={usage.input_tokens} output_tokens={usage.output_tokens}")


def _print_summary(message: Any) -> None:
    usage = message.usage
    print(f"   stop_reason: {message.stop_reason}")
    print(f"   usage:       input_tokens={usage.input_tokens} output_tokens={usage.output_tokens}")


def _bypass_proxies_for_loopback() -> None:
    """Keep loopback traffic off any HTTP(S)_PROXY: both aiohttp and the SDK honour NO_PROXY."""
    for variable in ("NO_PROXY", "no_proxy"):
        present = [host for host in os.environ.get(variable, "").split(",") if host.strip()]
        os.environ[variable] = ",".join(present + [host for host in LOOPBACK_HOSTS if host not in present])
