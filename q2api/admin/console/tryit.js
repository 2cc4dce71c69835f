// Try it: a streaming POST /v1/messages with the client key typed here (kept only in this page's
// memory), read with fetch + ReadableStream and shown as it arrives, with the request's vital signs.

import { currentModels, refreshModels } from "./models.js";
import { SseParser } from "./sse.js";
import { $, el, setText, show, formatMs, formatNumber } from "./dom.js";

const conversation = []; // the turns so far, sent again with each new message
let running = null; // the AbortController of the request in flight

export function wireTryIt() {
  $("try-form").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("try-prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("try-form").requestSubmit();
    }
  });
  $("try-stop").addEventListener("click", () => running?.abort());
  $("try-clear").addEventListener("click", () => {
    running?.abort();
    conversation.length = 0;
    $("try-transcript").replaceChildren();
    show($("try-empty"), true);
    resetFacts();
  });
}

/** Fill the model list from the catalogue (keeps the current choice when it is still offered). */
export async function prepareTryIt() {
  const models = currentModels().length ? currentModels() : await refreshModels();
  const select = $("try-model");
  const chosen = select.value;
  select.replaceChildren(...models.map((model) => el("option", { value: model.id }, model.display_name ?? model.id)));
  if (models.some((model) => model.id === chosen)) select.value = chosen;
}

function resetFacts() {
  for (const id of ["request-id", "status", "ttft", "total", "stop", "usage"]) setText($(`fact-${id}`), "—");
  show($("try-error"), false);
}

function fail(text) {
  setText($("try-error"), text);
  show($("try-error"), true);
}

function bubble(role, text) {
  const body = el("div", { className: "bubble-text" }, text);
  const item = el("li", { className: `bubble ${role}` }, el("span", { className: "bubble-role" }, role), body);
  $("try-transcript").append(item);
  show($("try-empty"), false);
  return { item, body };
}

async function send() {
  const prompt = $("try-prompt").value.trim();
  if (!prompt || running) return;
  resetFacts();
  const key = $("try-key").value.trim();
  const request = {
    model: $("try-model").value,
    max_tokens: Number($("try-max-tokens").value) || 1024,
    stream: true,
    messages: [...conversation, { role: "user", content: prompt }],
  };
  const question = bubble("user", prompt);
  const reply = bubble("assistant", "");
  reply.item.classList.add("streaming");
  $("try-prompt").value = "";
  running = new AbortController();
  $("try-send").disabled = true;
  $("try-stop").disabled = false;
  const started = performance.now();
  let text = "";
  try {
    const response = await fetch("/v1/messages", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "anthropic-version": "2023-06-01",
        ...(key ? { "x-api-key": key } : {}),
      },
      body: JSON.stringify(request),
      signal: running.signal,
      credentials: "omit",
      cache: "no-store",
    });
    setText($("fact-request-id"), response.headers.get("request-id") ?? "—");
    setText($("fact-status"), `${response.status} ${response.statusText}`.trim());
    if (!response.ok) {
      const answer = await response.json().catch(() => null);
      const error = answer?.error ?? {};
      fail(`${response.status} ${error.type ?? ""}: ${error.message ?? "the gateway refused the request"}`);
      // Nothing was answered: the message goes back to the box for another try.
      question.item.remove();
      reply.item.remove();
      show($("try-empty"), conversation.length === 0);
      $("try-prompt").value = prompt;
      return;
    }
    text = await readStream(response, started, (piece) => {
      reply.body.append(piece);
    });
    conversation.push({ role: "user", content: prompt }, { role: "assistant", content: text || "(no text)" });
  } catch (error) {
    if (error.name === "AbortError") fail("Stopped.");
    else fail(`The request failed: ${error.message}`);
  } finally {
    setText($("fact-total"), formatMs(performance.now() - started));
    reply.item.classList.remove("streaming");
    running = null;
    $("try-send").disabled = false;
    $("try-stop").disabled = true;
  }
}

/** Read the SSE body to its end; calls `onText` with each text piece; returns the whole text. */
async function readStream(response, started, onText) {
  const parser = new SseParser();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const usage = { input: 0, output: 0 };
  let text = "";
  let firstToken = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    for (const { event, data } of parser.push(value)) {
      switch (event) {
        case "message_start":
          usage.input = data.message?.usage?.input_tokens ?? 0;
          break;
        case "content_block_delta":
          if (firstToken === null) {
            firstToken = performance.now() - started;
            setText($("fact-ttft"), formatMs(firstToken));
          }
          if (data.delta?.type === "text_delta") {
            text += data.delta.text;
            onText(data.delta.text);
          }
          break;
        case "message_delta":
          setText($("fact-stop"), data.delta?.stop_reason ?? "—");
          usage.output = data.usage?.output_tokens ?? usage.output;
          break;
        case "error":
          fail(`Stream error ${data.error?.type ?? ""}: ${data.error?.message ?? ""}`);
          break;
        default: // ping, content_block_start/stop, message_stop
      }
      setText($("fact-usage"), `${formatNumber(usage.input)} in / ${formatNumber(usage.output)} out`);
    }
  }
  return text;
}
