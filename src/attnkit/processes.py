"""Whether a process still lives, and a worker process that exits with the one that started it."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def die_with_parent(parent: int, every_s: float = 0.5) -> None:
    """In a worker process: exit once ``parent`` (the pid of the process that started it, read there)
    is gone, however it went (kill -9 included): a killed ``prepare`` or ``serve`` leaves no workers
    behind. The pid comes from the parent because one killed before the worker got here has already
    been replaced by init. A thread watches it (the kernel's PR_SET_PDEATHSIG would follow the
    starting thread, not the process)."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="attnkit-parent-watch", daemon=True).start()
