"""The upstream opener of one turn of a pinned conversation (session affinity, q2api.accounts.session_affinity).

Every upstream call the turn's reply makes (a web search's continuation, a repair turn, the call
sent again without a refused signature) goes through it, so each one asks the account choice for
the conversation's account first.
"""

from __future__ import annotations

from q2api.accounts.session_affinity import TurnPin
from q2api.amazonq.attempts import UpstreamTrace
from q2api.amazonq.turn_affinity import TurnAffinity
from q2api.amazonq.types import GenerateAssistantResponseRequest
from q2api.amazonq.upstream import OpenedReply
from q2api.server.lifecycle.reply import UpstreamOpener


class PinnedOpener:
    def __init__(self, upstream: UpstreamOpener, turn: TurnPin) -> None:
        self._upstream = upstream
        self._turn = turn

    def open_stream(
        self,
        payload: GenerateAssistantResponseRequest,
        trace: UpstreamTrace | None = None,
        affinity: TurnAffinity | None = None,
    ) -> OpenedReply:
        return self._upstream.open_stream(payload, trace, affinity or self._turn)

    async def settled(self) -> None:
        """The turn's pin is written (or a second went by): awaited before the reply's last byte."""
        await self._turn.settled()
