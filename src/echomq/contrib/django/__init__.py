"""A backend for Django's task framework (``django.tasks`` on Django 6, the ``django-tasks``
backport on Django 5.2): ``@task`` functions enqueued with ``.enqueue()`` run on ``echomq
worker echomq.contrib.django:app``, their results read back with ``get_result()``.

    TASKS = {
        "default": {
            "BACKEND": "echomq.contrib.django.EchoMQBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": "valkey://127.0.0.1:6379", "queue": "django"},
        }
    }

docs/guides/django.md has the options and what maps to what.
"""

from __future__ import annotations

from typing import Any

from echomq.contrib.django._backend import EchoMQBackend, worker_app

__all__ = ["EchoMQBackend", "worker_app"]


def __getattr__(name: str) -> Any:
    """``echomq.contrib.django:app``: the App of the ``default`` task backend, made when the
    worker asks for it (Django is set up first, from ``DJANGO_SETTINGS_MODULE``)."""
    if name == "app":
        import django
        from django.core.exceptions import ImproperlyConfigured

        from echomq.errors import InvalidArgument

        try:
            django.setup()
        except ImproperlyConfigured as exc:
            raise InvalidArgument("handler", f"{__name__}:app", str(exc)) from None
        return worker_app("default")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
