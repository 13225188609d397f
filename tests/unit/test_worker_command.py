"""``echomq worker`` without a server: the supervisor's children's command and environment,
refused abbreviations, exit 2 for refused arguments and 1 for a failure while serving, the
startup line, and capacity's worker processes."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from echomq import App, EchoMQError, InvalidArgument
from echomq.cli import main
from echomq.consumers import loops
from echomq.ops.capacity import Capacity, report
from echomq.tasks import serve_tasks
from echomq.tasks.supervisor import Supervisor, child_arguments


def test_the_supervisor_starts_children_without_its_processes_flag_or_the_url() -> None:
    argv = ["--url", "valkey://:pw@h", "worker", "app:app", "--processes", "4", "--burst"]
    assert child_arguments(argv) == ["worker", "app:app", "--burst"]
    assert child_arguments(
        ["worker", "a:b", "--processes=2", "--url=valkey://h", "--ready-fd", "7"]
    ) == [
        "worker",
        "a:b",
    ]
    supervisor = Supervisor(argv, 4, 1.0, "valkey://:pw@h")
    assert supervisor.env is not None
    assert supervisor.env["ECHOMQ_URL"] == "valkey://:pw@h"  # in the environment, not argv
    assert not [arg for arg in supervisor.command if "pw" in arg]


def test_an_abbreviated_option_is_refused_not_taken_for_processes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "x:app", "--proc", "2"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --proc" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--log-level", "LOUD"),
        ("--backoff-base", "-1"),
        ("--backoff-cap", "-0.5"),
        ("--max-stalled", "0"),
        ("--stop-timeout", "-5"),
        ("--pool", "0"),
        ("--concurrency", "0"),
        ("--processes", "0"),
    ],
)
def test_a_bad_worker_flag_is_refused_by_its_name_before_any_connection(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 1 refuses connections: an error naming the flag proves nothing was tried.
    argv = ["--url", "valkey://127.0.0.1:1", "worker", "echomq.testing:discard", "--queue", "q"]
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err
    assert f"invalid {flag} " in err, err
    assert "connect" not in err


@pytest.mark.parametrize("fd", ["1", "999"])
def test_a_ready_fd_that_is_no_pipe_is_refused_by_its_name(
    fd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--url", "valkey://127.0.0.1:1", "worker", "echomq.testing:discard", "--queue", "q"]
    assert main([*argv, "--ready-fd", fd]) == 2
    err = capsys.readouterr().err
    assert "invalid --ready-fd " in err, err
    assert "connect" not in err


def test_a_worker_failing_while_serving_exits_1_for_the_supervisor_to_restart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Exit 2 is for refused arguments, which the supervisor never restarts; a server that is
    # not there (yet) is a crash it restarts after its backoff.
    argv = ["--url", "valkey://127.0.0.1:1", "worker", "echomq.testing:discard", "--queue", "q"]
    assert main(argv) == 1
    assert "echomq worker: " in capsys.readouterr().err


def test_a_child_refusing_its_arguments_is_not_restarted() -> None:
    # `python -m echomq worker` without a target exits 2, as every child would: stop, fail.
    supervisor = Supervisor(["worker"], 2, 1.0)
    assert asyncio.run(asyncio.wait_for(supervisor.run(), 30)) == 1
    assert supervisor.restarts == 0
    assert sys.executable in supervisor.command


def test_capacity_sizes_the_worker_processes_for_the_target() -> None:
    found = Capacity(0.001, 0.00005, 8000, target=20_000, handler=0, concurrency=10)
    assert found.processes == 3  # 20,000 / 8,000 a process, rounded up
    assert dict(report(found))["worker processes for the target"] == (
        "3 (one process sustained 8,000 jobs/s)"
    )


async def test_the_startup_line_names_the_app_and_never_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App("valkey://user:sekrit@127.0.0.1:1", queue="mail")

    @app.task(name="send")
    async def send() -> None: ...

    with caplog.at_level(logging.INFO, logger="echomq.tasks"), pytest.raises(EchoMQError):
        await serve_tasks(app, "mailer:app")  # nothing listens on port 1: it stops at connect
    (line,) = [r.getMessage() for r in caplog.records if "echomq worker:" in r.getMessage()]
    assert line == (
        "echomq worker: app mailer:app on valkey://user:***@127.0.0.1:1; queues mail; "
        "tasks send; concurrency 10"
    )


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width


def test_worker_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    shown = _help(["worker", "--help"], capsys)
    assert "seconds a claimed job is held (default: 30.0)" in shown
    assert "(default: the App's concurrency, 10 unless it says; 10 for a handler)" in shown
    assert "of tasks without retries of their own, and of handlers (default: 3)" in shown
    assert "--loop {auto,asyncio,uvloop}" in shown
    assert "(default: auto)" in shown


def test_echomq_help_is_plain_words_without_markup_or_module_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = _help(["--help"], capsys)
    assert "``" not in shown
    assert "echomq.ops" not in shown
    assert "read and steer a live queue (stats, lanes, ring," in shown


def test_loop_auto_takes_uvloop_when_installed_and_asyncio_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert loops.choose("auto")[0] == "uvloop"  # the dev install has it
    assert loops.choose("asyncio") == ("asyncio", asyncio.new_event_loop)
    assert loops.run_on(loops.choose("uvloop")[1], _loop_module()) == "uvloop"
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as an install without the extra
    assert loops.choose("auto") == ("asyncio", asyncio.new_event_loop)
    with pytest.raises(InvalidArgument, match=r"pip install 'echomq\[uvloop\]'") as refused:
        loops.choose("uvloop")
    assert refused.value.argument == "--loop"


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_loop_uvloop_without_uvloop_is_refused_before_any_connection(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    argv = ["--url", "valkey://127.0.0.1:1", "worker", "echomq.testing:discard", "--queue", "q"]
    assert main([*argv, "--loop", "uvloop"]) == 2
    err = capsys.readouterr().err
    assert "invalid --loop 'uvloop'" in err, err
    assert "pip install 'echomq[uvloop]'" in err
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--loop", "trio"])
    assert exited.value.code == 2
    assert "invalid choice: 'trio'" in capsys.readouterr().err
