"""What `--limits` may cost: its steps' bounds, and the calls and bytes its confirmation announces.

Apart from the steps (q2api.probe.limit_steps) so that the command line's help can name them without
importing the probe: `q2api serve` builds the whole parser, and the probe costs a worker ~0.7 MB.
"""

from __future__ import annotations

PAYLOAD_START_BYTES = 256 * 1024
PAYLOAD_CEILING_BYTES = 16 * 1024 * 1024
PAYLOAD_PRECISION = 1.05  # the smallest refused body is at most 5 % larger than the largest accepted
PAYLOAD_MAX_CALLS = 14
ASSUMED_HISTORY_CAP = 198  # q2api.conversion.trimming's policy, and the peers' figure
HISTORY_CEILING = 1000
HISTORY_MAX_CALLS = 14
# What the confirmation says: at most this many calls, about this many bytes sent in all.
LIMITS_CALLS = PAYLOAD_MAX_CALLS + HISTORY_MAX_CALLS
LIMITS_BYTES = 80 * 1024 * 1024
