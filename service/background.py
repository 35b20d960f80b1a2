"""Make the calling process a background one: it runs only when no other process wants a core.

Imports nothing heavy, so a process pool can run it before numpy (and its BLAS threads) load.
"""

from __future__ import annotations

import os

NICENESS = 19  # the lowest nice value: the fallback where SCHED_IDLE is missing
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def become_background() -> None:
    """SCHED_IDLE on every thread, and one BLAS thread, so one such process holds one core at most.

    Under SCHED_IDLE a waking request thread preempts this process at once; a nice-19 process
    keeps the core for the rest of its time slice (about 1.5 ms on 2 cores) at every wakeup.
    Linux sets the policy per thread; threads started later inherit it.
    """
    for name in BLAS_THREADS:
        os.environ[name] = "1"  # read when numpy first loads, which is after this
    for tid in _threads():
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):  # not Linux, or SCHED_IDLE refused
            os.setpriority(os.PRIO_PROCESS, tid, NICENESS)


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread only
        return [0]
