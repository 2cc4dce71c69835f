"""Event-stream decoder throughput: our EventStreamDecoder against botocore's EventStreamBuffer.

Encodes N `assistantResponseEvent` frames with 16-character `{"content": ...}` payloads (the shape
of a real Amazon Q text stream), then decodes them fed in realistic network reads (random 1-16 KiB
chunks) and as one whole buffer. Prints frames/second, median and p90 over several runs.

    .venv/bin/python bench/bench_eventstream.py [--frames 200000] [--runs 7] [--no-botocore]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from q2api.amazonq.eventstream import EventStreamDecoder, encode_event


def build_stream(frame_count: int) -> bytes:
    rng = random.Random(1)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,"
    return b"".join(
        encode_event("assistantResponseEvent", {"content": "".join(rng.choices(alphabet, k=16))})
        for _ in range(frame_count)
    )


def split_reads(stream: bytes, low: int, high: int) -> list[bytes]:
    rng = random.Random(2)
    chunks = []
    pos = 0
    while pos < len(stream):
        size = rng.randint(low, high)
        chunks.append(stream[pos : pos + size])
        pos += size
    return chunks


def split_frames(stream: bytes) -> list[bytes]:
    frame_length = int.from_bytes(stream[:4], "big")  # every benchmark frame has the same size
    return [stream[pos : pos + frame_length] for pos in range(0, len(stream), frame_length)]


def decode_ours(chunks: list[bytes]) -> int:
    decoder = EventStreamDecoder()
    count = 0
    for chunk in chunks:
        count += len(decoder.feed(chunk))
    decoder.close()
    return count


def decode_botocore(chunks: list[bytes]) -> int:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    count = 0
    for chunk in chunks:
        buffer.add_data(chunk)
        for _message in buffer:
            count += 1
    return count


def measure(decode: Callable[[list[bytes]], int], chunks: list[bytes], expected: int, runs: int) -> list[float]:
    rates = []
    for _ in range(runs):
        started = time.perf_counter()
        count = decode(chunks)
        elapsed = time.perf_counter() - started
        if count != expected:
            raise SystemExit(f"{decode.__name__} decoded {count} frames, expected {expected}")
        rates.append(count / elapsed)
    return rates


def p90(values: list[float]) -> float:
    # The 90th percentile of *throughput* from below: 90% of runs were at least this fast.
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.1) - 1)] if len(ordered) >= 10 else ordered[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-botocore", action="store_true")
    args = parser.parse_args()

    started = time.perf_counter()
    stream = build_stream(args.frames)
    encode_rate = args.frames / (time.perf_counter() - started)
    scenarios = {
        "1-16 KiB reads": split_reads(stream, 1024, 16 * 1024),
        "whole buffer": [stream],
        "64-byte reads": split_reads(stream, 64, 64),
        # Live streaming: the upstream flushes each event as the model produces it.
        "one frame a read": split_frames(stream),
    }
    print(
        f"{args.frames} frames, {len(stream) / args.frames:.0f} bytes each, {len(stream) / 1e6:.1f} MB; "
        f"{args.runs} runs; frames/s median (worst-decile)"
    )
    print(f"  encode_event (incl. orjson, random text) {encode_rate:,.0f} frames/s (one run)")
    decoders: list[tuple[str, Callable[[list[bytes]], int], int]] = [("q2api", decode_ours, args.runs)]
    if not args.no_botocore:
        # botocore re-copies its buffer per frame: quadratic on a whole buffer, so fewer runs there.
        decoders.append(("botocore", decode_botocore, max(1, args.runs // 3)))
    for scenario, chunks in scenarios.items():
        for name, decode, runs in decoders:
            if name == "botocore" and scenario == "whole buffer" and args.frames > 20_000:
                print(f"  {scenario:16} {name:9} skipped (quadratic in buffer size)")
                continue
            rates = measure(decode, chunks, args.frames, runs)
            print(f"  {scenario:16} {name:9} {statistics.median(rates):>12,.0f}  ({p90(rates):,.0f})")


if __name__ == "__main__":
    main()
