"""What the JSON codec's nesting bound costs: ``JsonCodec.encode`` µs per payload, for a
typical small payload, a 200-row one (more brackets than the bound: its text is measured) and
one at the bound, for whichever echomq is on the import path (run it for two checkouts).

Run: ``PYTHONPATH=src .venv/bin/python bench/codec.py [--repeat 15]``. Best of ``--repeat``
timings, each of many calls, so the machine's noise inflates none of them.
"""

from __future__ import annotations

import argparse
import timeit
from typing import Any

from echomq.wire.codec import JsonCodec


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


PAYLOADS: dict[str, tuple[Any, int]] = {
    "small (3 args)": (
        {"task": "send", "args": {"tenant": "acme", "to": "a@x.test", "n": 3}},
        20_000,
    ),
    "200 rows of dicts": (
        {"task": "t", "args": {"rows": [{"id": i, "tags": ["a", "b]"]} for i in range(200)]}},
        300,
    ),
    "126 levels (at the bound)": ({"task": "t", "args": {"n": _nested(126)}}, 2_000),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    codec = JsonCodec()
    print("| payload | encode µs |")
    print("|---|---:|")
    for name, (payload, number) in PAYLOADS.items():
        best = min(
            timeit.repeat(lambda p=payload: codec.encode(p), number=number, repeat=options.repeat)
        )
        print(f"| {name} | {best / number * 1e6:.2f} |")


if __name__ == "__main__":
    main()
