"""The notification worker's pure parts: the backoff curve, the budgets, the error mapping."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramEntityTooLarge,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods import SendMessage

from codemojex.notify.delivery import BadToken, Permanent, Transient, classify
from codemojex.notify.policy import BadTokenError, NotifyOptions, backoff
from codemojex.notify.rate import NotifyLimits, RecentChats

METHOD = SendMessage(chat_id=1001, text="hi")
TOKEN = "123456:SECRET-token"


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 16.0), (7, 30.0), (60, 30.0)],
)
def test_backoff_doubles_from_half_a_second_up_to_the_cap(failures: int, seconds: float) -> None:
    assert backoff(failures) == seconds


def test_backoff_jitter_is_the_largest_share_added() -> None:
    assert backoff(3, jitter=0.1, draw=1.0) == pytest.approx(2.2)
    assert backoff(3, jitter=0.2, draw=1.0) == pytest.approx(2.4)
    assert backoff(3, jitter=0.5, draw=0.5) == pytest.approx(2.5)
    assert backoff(9, jitter=0.1, draw=0.5) == pytest.approx(31.5)  # jitter on top of the cap
    assert backoff(3, jitter=0.0, draw=1.0) == 2.0  # no jitter: the curve itself


def test_the_worker_backoff_uses_the_jitter_option() -> None:
    """The worker's wait (``NotifyOptions.backoff``) adds up to ``jitter`` of the curve."""
    assert NotifyOptions(jitter=0.5).backoff(2, 1.0) == pytest.approx(1.5)
    assert NotifyOptions(jitter=0.2).backoff(2, 1.0) == pytest.approx(1.2)
    assert NotifyOptions(jitter=0.2).backoff(2, 0.0) == 1.0
    assert NotifyOptions(jitter=0.0, backoff_cap=3.0).backoff(9, 1.0) == 3.0


def test_backoff_refuses_zero_failures() -> None:
    with pytest.raises(ValueError, match="failures must be >= 1"):
        backoff(0)


def test_groups_pay_three_buckets_private_chats_two() -> None:
    limits = NotifyLimits()
    assert [b.name for b in limits.buckets(1001)] == ["global", "chat:1001"]
    group = limits.buckets(-1001)
    assert [(b.name, b.burst) for b in group] == [
        ("global", 30),
        ("chat:-1001", 3),
        ("group:-1001", 20),
    ]
    assert group[2].rate == pytest.approx(20 / 60)


def test_429_is_transient_with_its_retry_after() -> None:
    outcome = classify(TelegramRetryAfter(METHOD, "Too Many Requests: retry after 7", 7))
    assert isinstance(outcome, Transient)
    assert outcome.retry_after == 7.0


@pytest.mark.parametrize(
    "error",
    [
        TelegramServerError(METHOD, "Internal Server Error"),
        TelegramNetworkError(METHOD, "Request timeout error"),
        ClientDecodeError(
            "Failed to decode object",
            json.JSONDecodeError("Expecting value", "<html>502</html>", 0),
            "<html>502 Bad Gateway</html>",
        ),
        TimeoutError(),
        aiohttp.ClientConnectionError("connection reset"),
        ConnectionResetError(),
        TelegramAPIError(METHOD, "I'm a teapot"),
    ],
    ids=type,
)
def test_server_network_and_unknown_errors_are_transient_with_backoff(error: Exception) -> None:
    outcome = classify(error)
    assert isinstance(outcome, Transient)
    assert outcome.retry_after is None


def test_an_html_page_is_not_copied_into_the_reason() -> None:
    error = ClientDecodeError(
        "Failed to decode object", ValueError("x"), "<html>" + "x" * 5000 + "</html>"
    )
    outcome = classify(error)
    assert "<html>" not in outcome.reason  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "error",
    [
        TelegramBadRequest(METHOD, "Bad Request: chat not found"),
        TelegramBadRequest(METHOD, "Bad Request: message is too long"),
        TelegramEntityTooLarge(METHOD, "Request Entity Too Large"),
    ],
    ids=str,
)
def test_bad_requests_are_permanent(error: Exception) -> None:
    outcome = classify(error)
    assert isinstance(outcome, Permanent)
    assert not outcome.blocked


def test_forbidden_is_permanent_and_marks_the_chat_blocked() -> None:
    outcome = classify(TelegramForbiddenError(METHOD, "Forbidden: bot was blocked by the user"))
    assert isinstance(outcome, Permanent)
    assert outcome.blocked


@pytest.mark.parametrize(
    "error",
    [TelegramUnauthorizedError(METHOD, "Unauthorized"), TelegramNotFound(METHOD, "Not Found")],
    ids=str,
)
def test_401_and_404_mean_a_bad_token(error: Exception) -> None:
    assert isinstance(classify(error), BadToken)


def test_the_token_never_reaches_a_reason_or_the_error() -> None:
    leak = aiohttp.InvalidURL(f"https://api.telegram.org/bot{TOKEN}/sendMessage")
    outcome = classify(leak, secret=TOKEN)
    assert TOKEN not in outcome.reason  # type: ignore[union-attr]
    assert "<token>" in outcome.reason  # type: ignore[union-attr]
    unauthorized = classify(TelegramUnauthorizedError(METHOD, f"bad {TOKEN}"), secret=TOKEN)
    assert isinstance(unauthorized, BadToken)
    error = BadTokenError(unauthorized.reason)
    assert TOKEN not in str(error)
    assert error.reason == "bad_token"
    assert "refused the bot token" in str(error)


def test_the_secret_half_of_the_token_never_reaches_a_reason() -> None:
    """An error may quote only the part after the colon; the reason hides it like the gateway."""
    secret = TOKEN.partition(":")[2]
    outcome = classify(aiohttp.InvalidURL(f"https://example.org/?key={secret}"), secret=TOKEN)
    assert isinstance(outcome, Permanent | Transient)
    assert secret not in outcome.reason
    assert "<token>" in outcome.reason


def test_delivered_ids_are_kept_a_day() -> None:
    """A delivered record guards only a rerun after a crash (a 60 s lease, its reap, retries):
    a day is ample, a week was ~18M keys at 30/s."""
    assert NotifyOptions().keep_delivered == 86_400.0


def test_only_a_wait_longer_than_the_global_refill_is_the_chats_own() -> None:
    limits = NotifyLimits()  # global 30/s: one token is at most ceil(1000/30) = 34 ms away
    assert not limits.own_budget_spent(0.001)
    assert not limits.own_budget_spent(0.034)
    assert limits.own_budget_spent(0.035)
    assert limits.own_budget_spent(1.0)
    slow = NotifyLimits(global_rate=5.0)  # 200 ms per global token: not the chat's until past
    assert not slow.own_budget_spent(0.2)
    assert slow.own_budget_spent(0.201)


def test_recent_chats_is_bounded_and_forgets_the_least_recent() -> None:
    recent = RecentChats(size=3)
    assert [recent.add(chat) for chat in (1, 2, 3)] == [True, True, True]
    assert not recent.add(1)  # known: and now the most recent
    assert recent.add(4)  # over the size: 2, the least recent, is forgotten
    assert len(recent) == 3
    assert 2 not in recent
    assert (1 in recent, 3 in recent, 4 in recent) == (True, True, True)
    with pytest.raises(ValueError, match="at least 1"):
        RecentChats(size=0)
