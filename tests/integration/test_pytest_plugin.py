"""echomq's pytest plugin as a user's suite meets it (docs/guides/testing.md): an ``async def``
test asking for ``echomq_queue`` runs under pytest-asyncio's default strict mode with no marker
and no ``asyncio_mode``, and without pytest-asyncio it fails saying what to install. Each case
is a pytest run of its own (pytester), on the session's server."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TEST = """
from echomq import Queue


async def test_enqueue(echomq_queue: Queue) -> None:
    verdict = await echomq_queue.enqueue({"a": 1})
    assert verdict.kind == "enqueued"
"""


def _run(pytester: pytest.Pytester, valkey_url: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=USER_TEST)
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"  # strict: the default
    )
    return pytester.runpytest_subprocess(
        "--echomq-url", valkey_url, "-p", "no:cacheprovider", *args
    )


def test_an_async_test_asking_for_the_queue_runs_in_strict_mode_unmarked(
    pytester: pytest.Pytester, valkey_url: str
) -> None:
    result = _run(pytester, valkey_url)
    result.assert_outcomes(passed=1)


def test_without_pytest_asyncio_the_failure_says_what_to_install(
    pytester: pytest.Pytester, valkey_url: str
) -> None:
    result = _run(pytester, valkey_url, "-p", "no:asyncio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*test_enqueue asks for echomq's async fixture echomq_queue*install pytest-asyncio*"]
    )
