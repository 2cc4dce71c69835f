"""Each account's hosts (docs/protocol.md#hosts): the derived lists, the override, the body rules, rests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from q2api.amazonq.host_choice import HostChoice
from q2api.amazonq.host_rests import HostRests
from q2api.amazonq.hosts import (
    Host,
    HostKind,
    accepts_account,
    api_region,
    first_host,
    host_kind,
    inference_hosts,
    management_url,
    parse_override,
    sends_profile,
    shape_document,
    write_override,
)
from q2api.amazonq.service_api import ServiceApis

RUNTIME_US = "https://runtime.us-east-1.kiro.dev/"
Q_US = "https://q.us-east-1.amazonaws.com/"
CW = "https://codewhisperer.us-east-1.amazonaws.com/"


def urls(hosts: tuple[Host, ...] | list[Host]) -> list[str]:
    return [host.url for host in hosts]


def test_social_logins_go_to_runtime_first_then_the_legacy_hosts() -> None:
    assert urls(inference_hosts("social", None)) == [RUNTIME_US, Q_US, CW]
    assert urls(inference_hosts("social", "eu-central-1")) == [
        "https://runtime.eu-central-1.kiro.dev/",
        "https://q.eu-central-1.amazonaws.com/",
    ]


def test_idc_logins_go_to_q_first_and_runtime_last() -> None:
    assert urls(inference_hosts("idc", "us-east-1")) == [Q_US, CW, RUNTIME_US]
    assert urls(inference_hosts("idc", "eu-west-1")) == [
        "https://q.eu-central-1.amazonaws.com/",
        "https://runtime.eu-central-1.kiro.dev/",
    ]


def test_api_keys_never_go_to_codewhisperer() -> None:
    hosts = inference_hosts("api_key", "us-east-1")
    assert urls(hosts) == [Q_US, RUNTIME_US]
    assert not accepts_account(Host(CW, HostKind.CODEWHISPERER), "api_key", has_profile=False)
    assert not sends_profile("api_key") and sends_profile("idc") and sends_profile("social")


def test_sso_regions_map_to_the_two_api_regions() -> None:
    assert api_region(None) == "us-east-1"
    assert api_region("us-west-2") == "us-east-1"
    assert api_region("ap-southeast-2") == "us-east-1"
    assert api_region("eu-north-1") == "eu-central-1"
    assert api_region("EU-CENTRAL-1") == "eu-central-1"
    assert management_url("eu-west-3") == "https://management.eu-central-1.kiro.dev/"


def test_the_kind_of_a_host_follows_from_its_name() -> None:
    assert host_kind(RUNTIME_US) is HostKind.RUNTIME
    assert host_kind("https://q.eu-central-1.amazonaws.com") is HostKind.Q
    assert host_kind(CW) is HostKind.CODEWHISPERER
    assert host_kind("http://127.0.0.1:8080/") is HostKind.OTHER


def test_the_override_replaces_every_accounts_list_in_its_order() -> None:
    override = parse_override(f"{Q_US}, runtime=http://127.0.0.1:9/ ,{Q_US}")
    assert [(host.url, host.kind) for host in override] == [
        (Q_US, HostKind.Q),
        ("http://127.0.0.1:9/", HostKind.RUNTIME),
    ]
    for kind in ("social", "idc", "api_key"):
        assert inference_hosts(kind, "eu-central-1", override) == override
    assert parse_override(write_override(override)) == override
    assert parse_override("") == ()


@pytest.mark.parametrize("raw", ["q.us-east-1.amazonaws.com", "mars=https://x/", "https://", "runtime=ftp://x/"])
def test_a_bad_override_names_the_entry(raw: str) -> None:
    with pytest.raises(ValueError, match=r"is not an http|unknown host kind"):
        parse_override(raw)


def test_a_host_that_requires_a_profile_is_skipped_by_an_account_without_one() -> None:
    runtime = Host(RUNTIME_US, HostKind.RUNTIME)
    assert not accepts_account(runtime, "idc", has_profile=False)
    assert accepts_account(runtime, "idc", has_profile=True)
    assert first_host("idc", None, has_profile=False, override=(runtime, Host(Q_US, HostKind.Q))).url == Q_US


def test_the_runtime_host_is_never_sent_the_legacy_fields() -> None:
    document = {
        "conversationState": {"conversationId": "c", "agentTaskType": "vibe", "agentContinuationId": "x"},
        "agentMode": "vibe",
        "systemPrompt": "old",
        "profileArn": "arn",
    }
    shaped = shape_document(document, Host(RUNTIME_US, HostKind.RUNTIME))
    assert shaped == {"conversationState": {"conversationId": "c"}, "profileArn": "arn"}
    assert document["agentMode"] == "vibe"  # the caller's document is left as it was
    assert shape_document(document, Host(Q_US, HostKind.Q)) is document


@given(
    kind=st.sampled_from(["social", "idc", "api_key", "unknown"]),
    region=st.one_of(st.none(), st.text(max_size=20), st.sampled_from(["us-east-1", "eu-central-1", "eu-west-1"])),
    has_profile=st.booleans(),
)
def test_every_account_has_a_host_it_may_use(kind: str, region: str | None, has_profile: bool) -> None:
    hosts = inference_hosts(kind, region)
    assert hosts and len(set(hosts)) == len(hosts)
    assert all(host.url.startswith("https://") for host in hosts)
    api = api_region(region)
    assert all(api in host.url for host in hosts if host.kind is not HostKind.CODEWHISPERER)
    usable = [host for host in hosts if accepts_account(host, kind, has_profile)]
    assert usable, "an account with no host could never serve"
    # The host every kind is accepted by (A8.3) is always on the list.
    assert any(host.kind is HostKind.Q for host in usable)


@given(st.lists(st.sampled_from([Q_US, RUNTIME_US, CW, "http://127.0.0.1:1/", "http://[::1]:2/x"]), max_size=6))
def test_an_override_reads_back_as_written(entries: list[str]) -> None:
    parsed = parse_override(",".join(entries))
    assert urls(parsed) == list(dict.fromkeys(entries))
    assert parse_override(write_override(parsed)) == parsed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_host_rests_for_that_account_only_and_comes_back() -> None:
    clock = Clock()
    rests = HostRests(first=60, ceiling=600, clock=clock)
    a, b = Host("https://a/", HostKind.OTHER), Host("https://b/", HostKind.OTHER)
    assert rests.rest("acct-1", a) == 60
    assert rests.order("acct-1", [a, b]) == [b, a]  # resting: last, never dropped
    assert rests.order("acct-2", [a, b]) == [a, b]  # another account still starts with it
    clock.now += 61
    assert rests.order("acct-1", [a, b]) == [a, b]  # its rest is over
    assert rests.rest("acct-1", a) == 120  # failed again in a row: the rest doubles
    rests.served("acct-1", a)
    assert rests.rest("acct-1", a) == 60  # a success forgets the past failures


@given(st.integers(min_value=1, max_value=40))
def test_rests_back_off_up_to_the_ceiling(failures: int) -> None:
    rests = HostRests(first=60, ceiling=1800, clock=Clock())
    host = Host("https://a/", HostKind.OTHER)
    seconds = [rests.rest("x", host) for _ in range(failures)]
    assert seconds == sorted(seconds)
    assert max(seconds) <= 1800
    assert seconds[0] == 60


def test_resting_hosts_are_ordered_by_the_end_of_their_rest() -> None:
    clock = Clock()
    rests = HostRests(first=60, clock=clock)
    a, b, c = (Host(f"https://{name}/", HostKind.OTHER) for name in "abc")
    rests.rest("x", a)
    rests.rest("x", a)  # 120 s
    rests.rest("x", b)  # 60 s
    assert rests.order("x", [a, b, c]) == [c, b, a]
    assert rests.is_resting("x", a) and not rests.is_resting("x", c)


class FakeCredential:
    def __init__(self, auth_kind: str, profile_arn: str | None = None, region: str | None = None) -> None:
        self.account_id = f"acct-{auth_kind}"
        self.label = auth_kind
        self.auth_kind = auth_kind
        self.region = region
        self.profile_arn = profile_arn


def test_the_catalogue_and_credits_follow_the_chats_host_choice() -> None:
    choice = HostChoice("https://a.example/,https://b.example/", rests=HostRests(clock=Clock()))
    apis = ServiceApis(session=None, hosts=choice)  # type: ignore[arg-type]  # no call is made here
    credential = FakeCredential("idc")
    assert apis.for_account(credential)._endpoint == "https://a.example"  # type: ignore[arg-type]
    a, b = choice.hosts(credential)  # type: ignore[arg-type]
    choice.failed(credential, a, b, "403")  # type: ignore[arg-type]
    assert apis.for_account(credential)._endpoint == "https://b.example"  # type: ignore[arg-type]
    assert apis.for_account(FakeCredential("social"))._endpoint == "https://a.example"  # type: ignore[arg-type]


def test_derived_hosts_per_account_when_nothing_is_overridden() -> None:
    choice = HostChoice("")
    assert choice.preferred(FakeCredential("social", "arn:x")).url == RUNTIME_US  # type: ignore[arg-type]
    assert choice.preferred(FakeCredential("social")).url == Q_US  # type: ignore[arg-type]  # no profile yet
    assert choice.preferred(FakeCredential("idc", region="eu-west-1")).url == "https://q.eu-central-1.amazonaws.com/"  # type: ignore[arg-type]
    assert choice.preferred(FakeCredential("api_key")).url == Q_US  # type: ignore[arg-type]
