"""Make the calling process a background one: it runs only when no other process wants a core.

Imports nothing heavy, so a process pool can run it before numpy (and its BLAS threads) load.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h
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


def die_with_parent() -> None:
    """Ask the kernel to kill this process when the thread that started it goes (a gunicorn
    worker's main thread, even under kill -9): a compute process never outlives its worker."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown is all there is
        return
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(0)


def start_compute_process(retain_memory: bool = True, threads: int = 1) -> None:
    """The initializer of the background pool's processes. `threads`: how many cores the
    engine may spread one trace over (heavy.compute_threads: the compute processes together
    never take the core kept for the request path)."""
    from .compute import parallel
    from .compute.allocator import retain_freed_memory

    die_with_parent()
    become_background()
    parallel.limit_threads(threads)
    if retain_memory:
        retain_freed_memory()  # large traces otherwise re-fault their buffers on every request


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread only
        return [0]
