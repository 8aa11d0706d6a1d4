"""Peak resident memory of this process, measured so that it can fail.

``resource.getrusage().ru_maxrss`` is a poor gauge in tests: Linux keeps it across
``execve`` (a child started by a big pytest process starts with the parent's peak) and
it never goes down, so a delta taken late in a long suite can hide real growth. Linux's
``VmHWM`` belongs to the current address space, and writing ``5`` to
``/proc/self/clear_refs`` resets it to the current RSS.
"""
from __future__ import annotations

import resource
import sys


def peak_rss_kb() -> int:
    """Peak RSS of this process's own address space, in KiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss


def reset_peak_rss() -> bool:
    """Reset the peak to the current RSS; False where the OS cannot (then a delta of
    :func:`peak_rss_kb` is only an upper bound's lower bound — callers should say so)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
