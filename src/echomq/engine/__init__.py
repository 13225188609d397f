"""The engine: a queue's keyspace, its Lua transitions (``lua/``, one file per atomic operation)
and the typed Python surface over them — admission, claim, settle, lanes, limits, buckets, ids,
reads, results, events and waiters, for the async ``Queue`` and the blocking ``SyncQueue``.

Internal: the stable API is what :mod:`echomq` exports; these modules may change between releases.
"""
