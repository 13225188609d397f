"""The ``codemojex`` command: ``up`` runs the whole game (``make run``), ``bot`` the bot alone
(gateway + workers, on Telegram or the sandbox), ``flood`` the reproducible load scenario."""

from __future__ import annotations

import argparse
import sys

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
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
