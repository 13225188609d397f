"""The peers' no-op handlers, importable by name (RQ stores ``module.function`` in each job).

``noop`` counts completions; ``timed`` records enqueue → start latency from the producer's
``time.perf_counter()`` (producer and worker share this process, so one clock). Both run in the
peer's own worker thread; ``reset`` clears them before each trial.
"""

from __future__ import annotations

import threading
import time

done = [0]
samples: list[float] = []
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        done[0] = 0
        samples.clear()


def noop(n: int) -> None:
    with _lock:
        done[0] += 1


def timed(t0: float) -> None:
    started = time.perf_counter()
    with _lock:
        samples.append(started - t0)
        done[0] += 1
