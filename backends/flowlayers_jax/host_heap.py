"""XLA:CPU's step buffers stay in the heap: glibc's malloc is told to keep freed memory for the next step.

XLA:CPU allocates each execution's temporary buffers with ``malloc`` on its worker threads (a LeNet step at batch
25 per device: about 25 MiB each) and frees them when the execution ends.  With glibc's defaults, memory that large
is either mapped afresh (above the mmap threshold) or taken from a thread arena's heap that glibc shrinks or
deletes once it is empty; either way the next step faults every page in again.  Some processes settle into
reusing the memory, most of flowlayers' did not, and the same program ran at 15 to 25 steps/s from one process to
the next (``bench/RESULTS_jax_heap.md``: page faults per step, steps/s).

``keep()`` sets two of glibc's ``mallopt`` parameters for the whole process, once, when the backend first runs on
its CPU platform: ``M_MMAP_THRESHOLD`` 32 MiB (buffers up to that size come from the heaps) and
``M_TOP_PAD`` (64 MiB a heap keeps free at its top rather than shrinking or being deleted).  The cost: each arena
that grew holds up to 64 MiB it does not use (glibc makes at most 8 per core).  Elsewhere than glibc (musl,
macOS, a preloaded jemalloc or tcmalloc) ``mallopt`` is absent or governs an allocator nobody uses: nothing
changes.  ``FLOWLAYERS_KEEP_HOST_HEAP=0`` leaves glibc as it was.
"""
import ctypes
import os
import sys

M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3        # glibc's malloc.h
# the largest threshold glibc's own adjustment reaches; a thread arena's heaps hold at most 64 MiB, so larger
# buffers are mapped afresh whatever the threshold
MMAP_THRESHOLD = 32 << 20
TOP_PAD = 64 << 20
_kept = [None]      # None: not asked yet; then whether glibc took the settings


def keep():
    """Apply the settings once per process; return whether glibc took them."""
    if _kept[0] is None:
        _kept[0] = _apply()
    return _kept[0]


def _apply():
    if os.environ.get("FLOWLAYERS_KEEP_HOST_HEAP", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version        # glibc only: musl has mallopt with other meanings
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TOP_PAD, TOP_PAD))
