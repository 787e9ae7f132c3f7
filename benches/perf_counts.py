"""`perf stat`'s software counts of one process, for the harnesses (`scan_scaling.py
--counters`, `ab_builds.py`'s `pf-` measurements). Software events only: no hardware counters
needed, so it works in VMs.

- `task-clock`: CPU time on all threads;
- `context-switches`: a thread that blocks on a lock or waits for work switches out;
- `syscalls:sys_enter_futex`: a lock or condition variable that had to wait or wake someone
  (uncontended locks make none);
- `page-faults`: memory touched for the first time (the kernel zeroes each page: time callgrind
  does not see).
"""

from __future__ import annotations

from pathlib import Path

# perf's event name → the name results use.
COUNTERS = {"task-clock": "cpu_ms", "context-switches": "switches",
            "syscalls:sys_enter_futex": "futex", "page-faults": "faults"}


def counted(cmd: list[str], out: Path, events=tuple(COUNTERS)) -> list[str]:
    """`cmd` under `perf stat`, writing its counts of `events` to `out` (see `read_counts`)."""
    return ["perf", "stat", "-x,", "-o", str(out), "-e", ",".join(events), "--", *cmd]


def read_counts(path: Path) -> dict[str, float]:
    """The counts `perf stat -x,` wrote, by `COUNTERS` name (one perf could not take is absent)."""
    out = {}
    for line in path.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in COUNTERS and fields[0].replace(".", "").isdigit():
            out[COUNTERS[fields[2]]] = float(fields[0])
    return out
