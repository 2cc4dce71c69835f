"""The loop guard: cycles of tool rounds and same-tool storms at the tail of the conversation."""

from __future__ import annotations

import orjson
import pytest

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.loop_guard import LoopMode, LoopPolicy, detect_tool_loops, loop_refusal, trailing_rounds
from q2api.conversion.report import FindingKind, Severity
from tests.support.converter_helpers import assistant, request_body, system, user
from tests.support.tool_sessions import SEED_ROUND, Call, session

BLOCK = LoopPolicy(LoopMode.BLOCK)


def request(messages):
    return parse_messages_request(orjson.dumps(request_body(messages)))


def kinds(findings):
    return [finding.kind for finding in findings]


DEFAULT = LoopPolicy()


def loops(rounds, policy=DEFAULT, **options):
    return detect_tool_loops(request(session(rounds, **options)), policy)


READ = Call("Read", {"file_path": "/src/app.py"}, "print('hi')")
GREP = Call("Grep", {"pattern": "TODO"}, "app.py:3: TODO")
TEST = Call("Bash", {"command": "pytest -q"}, "1 failed", is_error=True)


# ------------------------------------------------------------------ cycles


def test_the_seeds_loop_is_found_five_identical_rounds_of_three_bash_calls():
    [finding] = loops([SEED_ROUND] * 5)
    assert finding.kind is FindingKind.TOOL_LOOP_CYCLE and finding.severity is Severity.WARNING
    assert "the same tool round" in finding.detail and "5 times in a row" in finding.detail
    for command in ("git diff", "git status", "git log -1 --oneline"):
        assert command in finding.detail
    assert finding.message_index == 9  # the last assistant turn of the cycle


def test_a_cycle_of_three_different_tools_is_found():
    [finding] = loops([[READ], [GREP], [TEST]] * 3)
    assert finding.kind is FindingKind.TOOL_LOOP_CYCLE
    assert "a cycle of 3 tool rounds" in finding.detail and "3 times in a row" in finding.detail
    assert finding.detail.index("Read") < finding.detail.index("Grep") < finding.detail.index("Bash")


def test_the_shortest_period_is_reported():
    [finding] = loops([[READ], [GREP]] * 4)
    assert "a cycle of 2 tool rounds" in finding.detail and "4 times" in finding.detail


def test_fewer_repetitions_than_the_threshold_are_not_a_loop():
    assert loops([SEED_ROUND] * 2) == ()
    assert loops([[READ], [GREP], [TEST]] * 2 + [[READ], [GREP]]) == ()


def test_the_threshold_is_the_number_of_repetitions():
    assert loops([[READ], [GREP]] * 3, LoopPolicy(repetitions=4)) == ()
    assert loops([[READ], [GREP]] * 4, LoopPolicy(repetitions=4))
    assert loops([SEED_ROUND] * 2, LoopPolicy(repetitions=2))


def test_cycles_longer_than_the_longest_period_looked_for_are_not_reported():
    rounds = [[Call("Read", {"file_path": f"/{n}"}, str(n))] for n in range(6)]
    assert loops(rounds * 3) == ()
    assert loops(rounds * 3, LoopPolicy(max_cycle_rounds=6))


def test_the_same_calls_with_changing_results_are_polling_not_a_loop():
    polls = [[Call("Bash", {"command": "make status"}, f"building: {n * 10}% done")] for n in range(10)]
    assert loops(polls, BLOCK) == ()


def test_key_order_and_the_order_of_parallel_calls_do_not_hide_a_loop():
    rounds = [
        [Call("Edit", {"a": 1, "b": 2}, "ok"), READ],
        [READ, Call("Edit", {"b": 2, "a": 1}, "ok")],
        [Call("Edit", {"a": 1, "b": 2}, "ok"), READ],
    ]
    assert kinds(loops(rounds)) == [FindingKind.TOOL_LOOP_CYCLE]


def test_a_loop_the_conversation_moved_on_from_no_longer_counts():
    looping = [SEED_ROUND] * 3
    # The model answered in text, then the person wrote: every later request would otherwise be refused.
    assert loops(looping, BLOCK, after=[assistant("I seem stuck."), user("Stop, just summarise.")]) == ()
    # The person wrote right after the tool results, before the model answered.
    assert loops(looping, BLOCK, after=[user("stop running git")]) == ()
    # A different round after the loop ends it too.
    assert loops([*looping, [READ]], BLOCK) == ()
    # Claude Code's role:"system" context between rounds does not end the run.
    assert loops(looping, BLOCK, after=[system("reminder")])


def test_calls_without_a_result_take_part_like_the_others():
    # A parallel round where one call never got its result (the user pressed Esc): still comparable.
    messages = [user("go")]
    for number in range(3):
        uses = [
            {"type": "tool_use", "id": f"a{number}", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_use", "id": f"b{number}", "name": "Read", "input": {"file_path": "/x"}},
        ]
        messages += [assistant(uses), user([{"type": "tool_result", "tool_use_id": f"a{number}", "content": "x"}])]
    assert kinds(detect_tool_loops(request(messages))) == [FindingKind.TOOL_LOOP_CYCLE]


def test_rounds_keep_their_calls_and_results_in_order():
    rounds = trailing_rounds(request(session([[READ, GREP], [TEST]])).messages)
    assert [[call.name for call in round_] for round_ in rounds] == [["Read", "Grep"], ["Bash"]]
    assert rounds[1][0].is_error and rounds[0][0].result is not None
    assert trailing_rounds(request([user("hi")]).messages) == []


# ------------------------------------------------------------------ storms


def edits(count, *, result="String to replace not found in file.", is_error=True, name="Edit"):
    return [[Call(name, {"file_path": "/a.py", "old_string": f"v{n}"}, result, is_error)] for n in range(count)]


def test_a_tool_failing_again_and_again_with_changing_input_is_a_storm():
    [finding] = loops(edits(8))
    assert finding.kind is FindingKind.TOOL_LOOP_STORM
    assert finding.detail == "Edit called 8 times in a row with 8 different inputs, and every call failed"


def test_the_same_acknowledgement_for_every_call_is_not_a_storm():
    # TodoWrite answers every update the same way; that is not a model going round in circles.
    assert loops(edits(12, result="Todos have been modified successfully", is_error=False, name="TodoWrite")) == ()


def test_no_storm_below_the_storm_threshold_or_when_results_differ():
    assert loops(edits(7)) == ()
    assert loops([*edits(4), [Call("Edit", {"file_path": "/a.py"}, "ok")], *edits(4)]) == ()
    assert loops(edits(5), LoopPolicy(storm_calls=5))
    reads = [[Call("Read", {"file_path": f"/src/{n}.py"}, f"content {n}")] for n in range(30)]
    assert loops(reads, BLOCK) == ()


# ------------------------------------------------------------------ modes and the refusal


def test_off_mode_finds_nothing():
    assert loops([SEED_ROUND] * 5, LoopPolicy(LoopMode.OFF)) == ()


def test_warn_mode_never_refuses():
    findings = loops([SEED_ROUND] * 5)
    assert findings and loop_refusal(findings, LoopPolicy(LoopMode.WARN)) is None


@pytest.mark.parametrize("rounds", [[SEED_ROUND] * 5, edits(8)], ids=["cycle", "storm"])
def test_block_mode_refuses_with_a_400_that_names_the_loop_and_the_way_out(rounds):
    findings = loops(rounds, BLOCK)
    refusal = loop_refusal(findings, BLOCK)
    assert refusal is not None
    assert refusal.status == 400 and refusal.error_type == "invalid_request_error"
    assert refusal.message.startswith(f"Tool loop detected: {findings[0].detail}")
    assert "send a new message" in refusal.message and "Q2API_LOOP_MODE=warn" in refusal.message


def test_no_loop_no_refusal():
    assert loop_refusal(loops([[READ]], BLOCK), BLOCK) is None
