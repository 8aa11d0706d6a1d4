"""SIGKILL at a chosen fault point: the crash tests' fork-and-kill harness."""
from __future__ import annotations

import os
import signal
import traceback

__all__ = ["FaultCounter", "run_killed"]


class FaultCounter:
    """The ``fault`` hook: records each fault point's name; kills this process at the
    ``kill_at``-th."""

    def __init__(self, kill_at=None):
        self.kill_at = kill_at
        self.points = []

    def __call__(self, name):
        self.points.append(name)
        if self.kill_at is not None and len(self.points) == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def run_killed(fn, kill_at: int) -> bool:
    """Run ``fn(fault)`` in a forked child killed at the ``kill_at``-th fault point.
    True when it was killed, False when it finished first."""
    pid = os.fork()
    if pid == 0:                                        # child
        code = 0
        try:
            fn(FaultCounter(kill_at))
        except BaseException:
            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, "child failed (see its traceback above)"
    return False
