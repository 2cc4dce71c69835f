"""Response hot path: upstream bytes → decoder → translator → SSE bytes.

    .venv/bin/python bench/bench_response_path.py [--events 20000] [--runs 15] [--frames-per-read 8]

Feeds a stream of `assistantResponseEvent` frames with 16-character texts
(plus a realistic head and tail: messageMetadataEvent, metadataEvent,
meteringEvent) in reads of several frames each, as aiohttp delivers them, and
encodes each read's events as one SSE chunk, exactly as the app does.
Prints upstream events per second (median and p90 of the wall-clock runs, and
the median by process CPU time, which a busy machine disturbs less) for a few
translator configurations. Target: ≥ 300,000 events/s on one core.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from q2api.amazonq.eventstream import EventStreamDecoder, encode_event
from q2api.anthropic.sse import encode_sse
from q2api.translation.translator import StreamTranslator

WORDS = "the quick brown fox jumps over a lazy dog; code: x = f(y) + 1, done. "


def build_stream(events: int) -> bytes:
    frames = [encode_event("messageMetadataEvent", {"conversationId": "c0ffee", "utteranceId": "u1"})]
    for i in range(events):
        start = (i * 7) % (len(WORDS) - 16)
        frames.append(encode_event("assistantResponseEvent", {"content": WORDS[start : start + 16]}))
    frames.append(encode_event("meteringEvent", {"unit": "credit", "unitPlural": "credits", "usage": 0.02}))
    frames.append(
        encode_event(
            "metadataEvent",
            {"tokenUsage": {"uncachedInputTokens": 900, "outputTokens": 4000, "totalTokens": 4900}},
        )
    )
    return b"".join(frames)


def chunk(data: bytes, frame_size: int, frames_per_read: int) -> list[bytes]:
    # Reads do not respect frame boundaries: cut at a fixed byte size near N frames.
    size = frame_size * frames_per_read + 13
    return [data[i : i + size] for i in range(0, len(data), size)]


def run_once(
    chunks: list[bytes], per_frame: bool = False, decode_only: bool = False, **options: object
) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, output size) of one pass."""
    started = time.perf_counter()
    cpu_started = time.process_time()
    decoder = EventStreamDecoder()
    if decode_only:
        frames = sum(len(decoder.feed(data)) for data in chunks)
        return time.perf_counter() - started, time.process_time() - cpu_started, frames
    translator = StreamTranslator(model="claude-sonnet-4-5", input_tokens=100, **options)  # type: ignore[arg-type]
    out = [encode_sse(translator.start())]
    if per_frame:
        feed = translator.feed
        for data in chunks:
            events = []
            for frame in decoder.feed(data):
                events += feed(frame)
            out.append(encode_sse(events))
    else:
        for data in chunks:
            out.append(encode_sse(translator.feed_all(decoder.feed(data))))
    decoder.close()
    out.append(encode_sse(translator.finish()))
    return time.perf_counter() - started, time.process_time() - cpu_started, sum(map(len, out))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--frames-per-read", type=int, default=8)
    args = parser.parse_args()

    data = build_stream(args.events)
    frame_size = len(encode_event("assistantResponseEvent", {"content": "x" * 16}))
    chunks = chunk(data, frame_size, args.frames_per_read)
    total_events = args.events + 3
    # feed_all() (one call per read, consecutive texts joined into one delta) is what the app
    # should use; per-frame feed() is shown for comparison (one delta per upstream event).
    configurations: dict[str, dict[str, object]] = {
        "default (thinking tags on)": {},
        "max_tokens=128000 (Claude Code)": {"max_tokens": 128_000},
        "stop_sequences + max_tokens": {"max_tokens": 128_000, "stop_sequences": ["\n\nHuman:", "STOP"]},
        "per-frame feed(), max_tokens": {"max_tokens": 128_000, "per_frame": True},
        "decoder alone (ceiling)": {"decode_only": True},
    }
    print(
        f"{total_events} upstream events, {len(data)} bytes, {len(chunks)} reads "
        f"(~{args.frames_per_read} frames each), {args.runs} runs"
    )
    # Runs are interleaved across configurations so machine noise hits all of them alike.
    rates: dict[str, list[float]] = {label: [] for label in configurations}
    cpu_rates: dict[str, list[float]] = {label: [] for label in configurations}
    sse_bytes: dict[str, int] = {}
    for options in configurations.values():
        run_once(chunks, **options)  # warm-up
    for _ in range(args.runs):
        for label, options in configurations.items():
            elapsed, cpu, sse_bytes[label] = run_once(chunks, **options)
            rates[label].append(total_events / elapsed)
            cpu_rates[label].append(total_events / max(cpu, 1e-9))
    for label, measured in rates.items():
        measured.sort()
        median = statistics.median(measured)
        # p90 of the time per run = the 10th percentile of the rate.
        p90 = measured[int(len(measured) * 0.1)]
        cpu_median = statistics.median(cpu_rates[label])
        print(
            f"  {label:32s} median {median:>9,.0f} events/s  p90 {p90:>9,.0f}  (CPU-time median {cpu_median:>9,.0f})"
            f"   ({sse_bytes[label]} {'frames' if 'decode_only' in configurations[label] else 'SSE bytes'})"
        )


if __name__ == "__main__":
    main()
