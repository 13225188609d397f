"""The ``codemojex`` command: ``up`` runs the whole game (``make run``), ``bot`` the bot alone
(gateway + workers, on Telegram or the sandbox), ``flood`` the reproducible load scenario."""

from __future__ import annotations

import argparse
import signal
import sys

# These modules only declare their command's arguments: what a command runs (aiogram, SQLAlchemy,
# the sandbox: seconds to import) loads when it runs, so `--help` and a mistyped argument answer
# at once. tests/unit/codemojex/test_cm_cli.py holds them to it.
from codemojex.botcommand import add_command as add_bot_command
from codemojex.flood.command import add_command as add_flood_command
from codemojex.up import add_command as add_up_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codemojex", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_up_command(commands)
    add_bot_command(commands)
    add_flood_command(commands)
    args = parser.parse_args(argv)
    # A shell starts a background job (`make run &`) with SIGINT ignored and Python keeps it so:
    # no KeyboardInterrupt would ever come and `kill -INT` would do nothing. Every command stops
    # on SIGINT, started in the foreground or not (its children then get the default, too).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
