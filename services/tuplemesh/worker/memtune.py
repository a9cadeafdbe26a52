"""Memory settings for a worker *process*: large payload buffers go back to the system when freed.

glibc serves an allocation above its mmap threshold (128 KiB at start) with mmap and returns it on
free, but after the first such free it raises the threshold to that size (up to 32 MiB), so from
then on megabyte payloads come from the heaps of the threads that decode them and stay there
after they are freed. Measured: a peer sending 15 MiB batches left a worker at several hundred
MiB above what it held. A fixed threshold keeps every large buffer mapped and returned at once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

__all__ = ["return_large_buffers_to_system"]

log = logging.getLogger(__name__)

#: mallopt's parameter for the mmap threshold (glibc's malloc.h)
_M_MMAP_THRESHOLD = -3
#: buffers at least this large are mapped on their own and unmapped when freed
LARGE_BUFFER_BYTES = 256 * 1024


def return_large_buffers_to_system() -> bool:
    """Fix glibc's mmap threshold for this process; False (and nothing changed) without glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt): its own policy stays
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))
    if not ok:
        log.debug("mallopt(M_MMAP_THRESHOLD) refused; the allocator keeps its own threshold")
    return ok
