"""What a worker process uses, read from Linux's /proc: CPU seconds and resident memory."""

from __future__ import annotations

import os


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` now, in MiB (0.0 when /proc does not say)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
