"""What the chosen model takes: a part it cannot read is refused, never dropped or sent to fail.

The model description (`ModelChoice.input_types`) comes from the built-in table today and from the
account's live catalogue (`ListAvailableModels.supportedInputTypes`) when that is known; this check
only reads it. Audio never gets this far: no Amazon Q model takes audio, and the request parser
already answers an `audio` block with a 400 that says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from q2api.amazonq.catalogue import IMAGE
from q2api.anthropic.errors import InvalidRequest
from q2api.conversion.turns import Turn, UserTurn
from q2api.models.table import ModelChoice


def check_input_types(model: ModelChoice, requested_model: str, turns: Sequence[Turn]) -> None:
    """Raise a 400 naming the model and the first part it cannot take."""
    if IMAGE in model.input_types:
        return
    for turn in turns:
        if isinstance(turn, UserTurn) and turn.images:
            raise InvalidRequest(
                turn.images[0].path,
                f"model {requested_model!r} (Amazon Q model {model.q_model_id!r}) takes no image input "
                f"(it takes: {', '.join(sorted(model.input_types))}); remove the image, describe it in text, "
                "or choose a model that reads images",
            )
