"""The settings of a small shop: its tasks run on echomq through ``EchoMQBackend``. The server
and the queue's name come from the environment, read here once, as settings do."""

from __future__ import annotations

import os
import secrets

import django

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(32)
ROOT_URLCONF = "shop.urls"
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
USE_TZ = True
# Django 6 ships django.tasks; on Django 5.2 the backport is an app of its own.
INSTALLED_APPS = [] if django.VERSION >= (6, 0) else ["django_tasks"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]

# --8<-- [start:tasks]
QUEUE = os.environ.get("SHOP_QUEUE", "shop")
TASKS = {
    "default": {
        "BACKEND": "echomq.contrib.django.EchoMQBackend",
        "QUEUES": ["default", "emails"],  # the Django queue names tasks may use
        "OPTIONS": {
            "url": os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"),
            "queue": QUEUE,  # the echomq queue of Django's "default" queue
            "queues": {"emails": f"{QUEUE}-emails"},  # and of the others
            "lane_kwarg": "tenant",  # a task's `tenant=` keyword is its job's lane
        },
    }
}
# --8<-- [end:tasks]
