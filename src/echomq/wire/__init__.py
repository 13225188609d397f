"""The wire: sockets to Valkey and what travels on them — the auto-pipelined asyncio connector
and its pool, the cluster router (MOVED/ASK/TRYAGAIN), the blocking wire under ``SyncQueue``, the
connection handshake, URLs and payload codecs. Nothing here knows what a job is.

Internal: the stable API is what :mod:`echomq` exports; these modules may change between releases.
"""
