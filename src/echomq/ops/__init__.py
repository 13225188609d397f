"""Operations: what an operator runs and reads — the CLI's queue verbs, capacity planning and the
consumers' observations behind the Prometheus collector. The public faces are :mod:`echomq.cli`,
:mod:`echomq.metrics` and :mod:`echomq.dashboard`.

Internal: the stable API is what :mod:`echomq` exports; these modules may change between releases.
"""
