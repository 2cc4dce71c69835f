"""The private directory where `q2api serve`'s workers keep their metrics for one run.

prometheus_client's multiprocess mode stores each worker's values in files
under ``PROMETHEUS_MULTIPROC_DIR``; a scrape answered by any worker merges
them. The directory must be empty when the run starts (old counts would be
added to the new ones) and is useless after it, so each run makes its own
(0700, in the system temp dir) and removes it when the server stops — also
when it stops on SIGTERM, which uvicorn re-raises after its graceful shutdown.

The variable must be set before ``prometheus_client`` is first imported (it
picks its storage then), so this module never imports it, and `serve` enters
:func:`metrics_directory` before anything that does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

# The same name as q2api.server.metrics.MULTIPROC_DIR_VARIABLE; not imported from there (see above).
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


class _Terminated(BaseException):
    """SIGTERM arrived (re-raised by uvicorn once it has shut down)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextlib.contextmanager
def metrics_directory() -> Iterator[Path]:
    """A fresh metrics directory in the environment the workers inherit; removed on the way out."""
    path = Path(tempfile.mkdtemp(prefix="q2api-metrics-"))
    previous_variable = os.environ.get(MULTIPROC_DIR_VARIABLE)
    os.environ[MULTIPROC_DIR_VARIABLE] = str(path)
    previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
    terminated = False
    try:
        yield path
    except _Terminated:
        terminated = True
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        shutil.rmtree(path, ignore_errors=True)
        if previous_variable is None:
            os.environ.pop(MULTIPROC_DIR_VARIABLE, None)
        else:
            os.environ[MULTIPROC_DIR_VARIABLE] = previous_variable
    if terminated:
        # Die of the signal as before, so supervisors see the same exit status.
        signal.raise_signal(signal.SIGTERM)
