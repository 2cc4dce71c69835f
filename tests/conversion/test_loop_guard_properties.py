"""Loop guard properties: long realistic agent sessions never trigger it (in any mode, at any
threshold it accepts), and any repeated cycle of rounds appended to them always does."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from q2api.anthropic.types import parse_messages_request
from q2api.conversion.loop_guard import LoopMode, LoopPolicy, detect_tool_loops, loop_refusal
from q2api.conversion.report import FindingKind
from tests.support.converter_helpers import request_body
from tests.support.tool_sessions import Call, session

BLOCK = LoopPolicy(LoopMode.BLOCK, repetitions=2, storm_calls=3)  # the strictest thresholds the settings accept


def found(rounds, policy):
    return detect_tool_loops(parse_messages_request(orjson.dumps(request_body(session(rounds)))), policy)


# The activities of a real session. Each one is built from a counter, so files, patterns and
# outputs differ as they do in a real session: a file read again has changed since, a build
# polled again has made progress, a test run after an edit prints a different failure.
ACTIVITIES = ("explore", "poll_build", "fix_test", "parallel_look", "git_check", "write", "plan")


def realistic_session(plan: list[tuple[str, int]]) -> list[list[Call]]:
    rounds: list[list[Call]] = []
    step = 0
    for activity, size in plan:
        for _ in range(size):
            step += 1
            if activity == "explore":
                rounds.append([Call("Read", {"file_path": f"/src/module_{step}.py"}, f"# module {step}\n...")])
            elif activity == "poll_build":
                rounds.append([Call("BashOutput", {"bash_id": "build"}, f"[{step}] compiling unit {step}...")])
            elif activity == "fix_test":
                rounds.append([Call("Bash", {"command": "pytest -q"}, f"{step} tests failed: test_{step}", True)])
                rounds.append([Call("Edit", {"file_path": "/src/app.py", "old_string": f"bug {step}"}, "ok")])
            elif activity == "parallel_look":
                rounds.append(
                    [
                        Call("Grep", {"pattern": f"symbol_{step}"}, f"src/a.py:{step}: symbol_{step}"),
                        Call("Glob", {"pattern": f"**/*_{step}.py"}, f"src/file_{step}.py"),
                    ]
                )
            elif activity == "git_check":
                rounds.append(
                    [
                        Call("Bash", {"command": "git status"}, f"modified: src/module_{step}.py"),
                        Call("Bash", {"command": "git diff --stat"}, f"1 file changed, {step} insertions(+)"),
                    ]
                )
            elif activity == "plan":  # the same acknowledgement every time
                todos = [{"content": f"step {step}", "status": "in_progress"}]
                rounds.append([Call("TodoWrite", {"todos": todos}, "Todos have been modified successfully")])
            else:
                rounds.append([Call("Write", {"file_path": f"/src/new_{step}.py", "content": f"x = {step}"}, "ok")])
    return rounds


sessions = st.lists(st.tuples(st.sampled_from(ACTIVITIES), st.integers(1, 6)), min_size=1, max_size=25).map(
    realistic_session
)


@settings(max_examples=150, deadline=None)
@given(sessions)
def test_long_realistic_sessions_never_trigger_the_guard(rounds):
    findings = found(rounds, BLOCK)
    assert findings == ()
    assert loop_refusal(findings, BLOCK) is None


@settings(max_examples=100, deadline=None)
@given(sessions, st.data())
def test_checking_twice_never_triggers_the_default_guard(rounds, data):
    # People and models run a check a second time to be sure; with the default threshold of 3
    # repetitions, any round done twice in a row stays legitimate.
    doubled = [round_ for round_ in rounds for _ in range(data.draw(st.integers(1, 2)))]
    assert found(doubled, LoopPolicy(LoopMode.BLOCK)) == ()


distinct_rounds = st.lists(
    st.lists(st.tuples(st.sampled_from(["Bash", "Read", "Grep", "Edit"]), st.text(max_size=8)), min_size=1, max_size=3),
    min_size=1,
    max_size=5,
    unique_by=lambda calls: tuple(sorted(calls)),
)


@settings(max_examples=150, deadline=None)
@given(sessions, distinct_rounds, st.integers(2, 5), st.integers(0, 2))
def test_any_repeated_cycle_is_found_after_any_session(prefix, cycle, threshold, extra):
    cycle_rounds = [[Call(name, {"arg": arg}, f"{name} says {arg!r}") for name, arg in calls] for calls in cycle]
    policy = LoopPolicy(LoopMode.BLOCK, repetitions=threshold)
    findings = found(prefix + cycle_rounds * (threshold + extra), policy)
    assert FindingKind.TOOL_LOOP_CYCLE in {finding.kind for finding in findings}
    refusal = loop_refusal(findings, policy)
    assert refusal is not None and refusal.status == 400
