"""What the gateway learns of each host's size limit (q2api.amazonq.body_sizes): which refusals are
size-shaped, and when a body is answered locally."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.body_sizes import IMPROPERLY_FORMED_SIZE_BYTES, BodySizes, is_size_refusal
from q2api.amazonq.errors import UpstreamHTTPError

MB = 1_000_000


def refusal(message: str, reason: str | None = None, status: int = 400) -> UpstreamHTTPError:
    return UpstreamHTTPError(status, "ValidationException", message, reason)


def test_size_shaped_refusals_are_recognised_and_improperly_formed_only_over_one_megabyte() -> None:
    assert is_size_refusal(refusal("Input is too long.", "CONTENT_LENGTH_EXCEEDS_THRESHOLD"), 10)
    assert is_size_refusal(refusal("Input content length exceeds threshold."), 10)
    assert is_size_refusal(refusal("Improperly formed request."), IMPROPERLY_FORMED_SIZE_BYTES + 1)
    assert not is_size_refusal(refusal("Improperly formed request."), IMPROPERLY_FORMED_SIZE_BYTES)
    assert not is_size_refusal(refusal("Improperly formed request.", "REQUEST_BODY_INVALID", status=403), 2 * MB)
    assert not is_size_refusal(refusal("Invalid model id", "INVALID_MODEL_ID"), 2 * MB)


def test_a_host_that_refused_a_size_has_larger_bodies_answered_locally_per_model() -> None:
    sizes = BodySizes()
    sizes.accepted("q", "m", 1_200_000)
    sizes.refused("q", "m", 1_500_000)
    assert sizes.known_too_large("q", "m", 1_600_000) == 1_500_000
    assert sizes.known_too_large("q", "m", 1_400_000) is None  # between: the host decides
    assert sizes.known_too_large("q", "other-model", 1_600_000) is None
    assert sizes.known_too_large("runtime", "m", 1_600_000) is None
    sizes.accepted("q", "m", 1_700_000)  # a limit in tokens: a larger body passed after all
    assert sizes.known_too_large("q", "m", 1_600_000) is None
    assert sizes.known_too_large("q", "m", 1_800_000) == 1_500_000


def test_refusals_of_bodies_under_a_megabyte_are_not_learnt() -> None:
    sizes = BodySizes()
    sizes.refused("q", "m", 600_000)  # a context window reached in tokens, not a byte ceiling
    assert sizes.known_too_large("q", "m", 5 * MB) is None


@given(
    st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=10 * MB)), max_size=30),
    st.integers(min_value=0, max_value=10 * MB),
)
def test_a_body_no_larger_than_one_accepted_is_never_answered_locally(events, size) -> None:
    sizes = BodySizes()
    for accepted, seen in events:
        (sizes.accepted if accepted else sizes.refused)("q", "m", seen)
    largest, smallest = sizes.figures("q", "m")
    answer = sizes.known_too_large("q", "m", size)
    if size <= largest or smallest is None or size < smallest:
        assert answer is None
    else:
        assert answer == smallest and answer > IMPROPERLY_FORMED_SIZE_BYTES
