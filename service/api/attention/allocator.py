"""The tuning the background compute processes run under: idle priority (`become_background`), death with
their worker (`die_with_parent`), and freed memory kept for reuse (glibc only: page faults dominate large
traces otherwise).

On this class of VM a first-touch page fault costs several microseconds; a fresh 3 MB array
faults 768 times (~5 ms), more than the matmul that fills it. glibc by default returns freed
blocks to the kernel (mmap threshold and trim threshold adapt upwards only slowly), so every
request re-faults its buffers. Fixing both thresholds makes the process keep and reuse them.
Called in the background compute processes, where large traces are computed (and by the
benchmarks), never at import time. They give the memory back once idle (`release_freed_memory`):
a burst of large traces leaves nothing behind. Request workers keep glibc's defaults.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's maximum: blocks below this come from the heap
TRIM_THRESHOLD = 512 * 1024 * 1024  # return heap memory to the kernel only past this much free


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def release_freed_memory() -> bool:
    """Give every free page of the heap back to the kernel now (glibc's malloc_trim)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    return bool(trim(0))


def retain_freed_memory() -> bool:
    """True when glibc accepted the thresholds; False elsewhere (musl, macOS): nothing changes."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


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
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile (a host script's timers)
            try:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            except (AttributeError, OSError):  # not Linux, or SCHED_IDLE refused
                os.setpriority(os.PRIO_PROCESS, tid, NICENESS)


def die_with_parent() -> None:
    """Ask the kernel to kill this process when the thread that started it goes (a gunicorn
    worker's main thread, even under kill -9): a compute process never outlives its worker."""
    prctl = getattr(_libc(), "prctl", None)
    if prctl is None:  # not Linux: the pool's own shutdown is all there is
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(0)


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread only
        return [0]
