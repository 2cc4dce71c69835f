"""Ctrl-C during `q2api login` cancels the pending device login: it stops polling, stores nothing, exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.stores import sqlite_store


def test_ctrl_c_while_the_login_waits_cancels_it(data_dir, token_service) -> None:
    token_service.device.interval = 0.05
    token_service.device.answers.clear()
    token_service.device.answers.extend(["authorization_pending"] * 100_000)  # nobody approves
    process = subprocess.Popen(
        [sys.executable, "-m", "q2api", "login", "--label", "me"],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the code is shown: the login is pending
            if "SIMU-" in line:
                break
        deadline = time.monotonic() + 30
        while not token_service.device.polls and time.monotonic() < deadline:
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "cancelled, nothing stored" in err and "Traceback" not in err
    polls = len(token_service.device.polls)
    time.sleep(0.3)
    assert len(token_service.device.polls) == polls  # nobody polls for it any more
    assert sqlite_store(data_dir).accounts() == []
