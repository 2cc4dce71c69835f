"""A store the client keys need, down for a while: one WARNING when it starts and one a minute while it
lasts, each saying how many requests it touched, never one per request; an INFO line when it is back."""

from __future__ import annotations

from q2api.tenants.outage import WARN_EVERY_SECONDS, Outage
from tests.support.gateway_harness import capture_logs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_long_outage_is_one_warning_a_minute_with_the_requests_it_touched() -> None:
    clock = Clock()
    outage = Outage("the client keys' counters", "requests are served without their limits", clock=clock)
    with capture_logs() as logs:
        for second in range(150):  # two and a half minutes, ten failing requests a second
            clock.now = 1000.0 + second
            for _ in range(10):
                outage.failed(ConnectionError("refused"), "admitted unchecked")
        assert outage.ongoing
        clock.now += 5
        outage.answered()
        outage.answered()  # only the first success ends it
    warnings = [line.message for line in logs.lines if line.level == "WARNING"]
    assert len(warnings) == 3  # at 0 s, 60 s and 120 s
    assert "1 request(s) admitted unchecked" in warnings[0]  # the request that began it
    assert f"{int(WARN_EVERY_SECONDS) * 10} request(s) admitted unchecked" in warnings[1]  # one minute's
    assert all(
        "ConnectionError: refused" in warning and "served without their limits" in warning for warning in warnings
    )
    infos = [line.message for line in logs.lines if line.level == "INFO"]
    assert len(infos) == 1 and "answer again after 154s" in infos[0]
    assert "299 request(s) admitted unchecked" in infos[0]  # after the one that warned at 120 s
    assert not outage.ongoing


def test_each_outage_warns_at_its_start_and_each_kind_of_touch_is_counted() -> None:
    clock = Clock()
    outage = Outage("the client key store", "requests with a store key get 503", clock=clock)
    with capture_logs() as logs:
        outage.failed(OSError("down"), "refused")
        clock.now += 1
        outage.answered()
        clock.now += 1
        outage.failed(OSError("down again"), "refused")  # a new outage: said at once
        outage.failed(OSError("down again"), "not counted")
        clock.now += WARN_EVERY_SECONDS
        outage.failed(OSError("still"), "refused")
    warnings = [line.message for line in logs.lines if line.level == "WARNING"]
    assert len(warnings) == 3
    assert "OSError: down again" in warnings[1]
    assert "1 request(s) not counted, 1 request(s) refused since the last line" in warnings[2]
