"""The Redactor: what a probe report may keep of a text from the upstream."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from q2api.probe.redaction import REDACTED, WITHHELD, Redactor

TOKEN = "aoaAAAAAGexampleAccessToken1234567890"


def test_a_message_keeps_its_words_and_loses_its_secrets():
    redactor = Redactor(secrets=[TOKEN, "arn:aws:codewhisperer:us-east-1:123456789012:profile/ABC"])
    message = f"token {TOKEN} of bob@example.org for arn:aws:iam::999988887777:role/x via socks5://u:pw@h:1 refused"
    kept = redactor.message(message)
    assert kept == f"token {REDACTED} of {REDACTED} for {REDACTED} via socks5://{REDACTED}@h:1 refused"
    assert redactor.message("profileArn is required for this request.") == "profileArn is required for this request."
    assert redactor.message("x" * 1000) is not None and len(redactor.message("word " * 200) or "") <= 300


def test_a_message_quoting_a_prompt_or_a_reply_is_withheld_whole():
    redactor = Redactor(texts=["Please summarise the merger plans of Contoso for the board"])
    assert redactor.message("You said: the merger plans of Contoso, which is too long") == WITHHELD
    assert redactor.message("Improperly formed request.") == "Improperly formed request."


def test_names_are_kept_only_when_they_are_plain_names():
    redactor = Redactor(secrets=[TOKEN])
    assert redactor.name("cacheReadInputTokens") == "cacheReadInputTokens"
    assert redactor.name("anthropic.claude-sonnet-4-5-20250929-v1:0") == "anthropic.claude-sonnet-4-5-20250929-v1:0"
    for leaky in (
        TOKEN,
        f"x{TOKEN}",
        "bob@example.org",
        "123456789012",
        "a b",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6Ik",
        None,
        3,
    ):
        assert redactor.name(leaky) == REDACTED


def test_a_label_is_withheld_as_a_word_not_inside_other_words():
    redactor = Redactor()
    redactor.add_personal("main")
    assert (
        redactor.message("account 'main' refused; see the domain main")
        == f"account '{REDACTED}' refused; see the domain {REDACTED}"
    )
    assert redactor.name("domain") == "domain" and redactor.name("main") == REDACTED


def test_the_guard_replaces_whatever_a_report_still_holds():
    redactor = Redactor(secrets=[TOKEN], texts=["a reply text that must not be kept"])
    guarded = redactor.guard(f'{{"a": "{TOKEN}", "b": "a reply text that must not be kept"}}')
    assert TOKEN not in guarded and "must not be kept" not in guarded and redactor.guarded == 2


secrets = st.text(string.ascii_letters + string.digits + "-_.+/=", min_size=8, max_size=60)


@given(secret=secrets, before=st.text(max_size=40), after=st.text(max_size=40))
def test_a_known_secret_never_survives_a_message_or_a_name(secret, before, after):
    redactor = Redactor(secrets=[secret])
    assert secret not in (redactor.message(before + secret + after) or "")
    assert secret not in redactor.name(before + secret + after)
