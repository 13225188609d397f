"""Consumers: the claim → run → settle loops (one job at a time, or in batches) and the parts
they share, the metronome that paces a pool of them, the upkeep cadence, and the worker process
that runs them from a handler path.

Internal: the stable API is what :mod:`echomq` exports; these modules may change between releases.
"""
