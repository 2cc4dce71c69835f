// A server-sent-events parser for fetch() bodies (EventSource cannot POST or send headers).

export class SseParser {
  constructor() {
    this.buffer = "";
  }

  /** Feed decoded text; returns the events completed by it, each {event, data} (data parsed as JSON). */
  push(text) {
    this.buffer += text;
    const events = [];
    let end;
    while ((end = this.#boundary()) !== null) {
      const block = this.buffer.slice(0, end.index);
      this.buffer = this.buffer.slice(end.index + end.length);
      const event = parseBlock(block);
      if (event) events.push(event);
    }
    return events;
  }

  #boundary() {
    const match = /\r\n\r\n|\n\n|\r\r/.exec(this.buffer);
    return match ? { index: match.index, length: match[0].length } : null;
  }
}

function parseBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split(/\r\n|\n|\r/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  const text = data.join("\n");
  try {
    return { event, data: JSON.parse(text) };
  } catch {
    return { event, data: text };
  }
}
