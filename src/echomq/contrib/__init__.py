"""Integrations with other frameworks, each behind an extra: ``echomq.contrib.django`` (a
backend for Django's task framework)."""
