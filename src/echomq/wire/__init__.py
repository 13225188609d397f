"""The wire: sockets to Valkey and what travels on them — the auto-pipelined asyncio connector
and its pool, the cluster router (MOVED/ASK/TRYAGAIN), the blocking wire under ``SyncQueue``, the
connection handshake, URLs and payload codecs. Nothing here knows what a job is.

Public: the names in ``__all__`` below (``from echomq.wire import Pool``); :mod:`echomq`
re-exports ``ConnectionOptions``. The modules inside may change between releases.
"""

from echomq.wire.cluster import ClusterRouter
from echomq.wire.codec import Codec, JsonCodec, RawCodec
from echomq.wire.connector import WIRE_VERSION, Connector
from echomq.wire.pool import Pool, Wire
from echomq.wire.url import ConnectionOptions

__all__ = [
    "WIRE_VERSION",
    "ClusterRouter",
    "Codec",
    "ConnectionOptions",
    "Connector",
    "JsonCodec",
    "Pool",
    "RawCodec",
    "Wire",
]
