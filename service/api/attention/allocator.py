"""Keep freed memory for reuse (glibc only): page faults dominate large traces otherwise.

On this class of VM a first-touch page fault costs several microseconds; a fresh 3 MB array
faults 768 times (~5 ms), more than the matmul that fills it. glibc by default returns freed
blocks to the kernel (mmap threshold and trim threshold adapt upwards only slowly), so every
request re-faults its buffers. Fixing both thresholds makes the process keep and reuse them.
Called in the background compute processes, where large traces are computed (and by the
benchmarks), never at import time. They give the memory back once idle (`release_freed_memory`):
a burst of large traces leaves nothing behind. Request workers keep glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util

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
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
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
