"""Consumers: the claim → run → settle loop, the metronome that paces a pool of them, the upkeep
cadence, and the worker process that runs them from a handler path.

Internal: the stable API is what :mod:`echomq` exports; these modules may change between releases.
"""
