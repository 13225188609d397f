"""The game stage, ``cm`` (guesses to score, a lane per player) and ``cm-settle`` (closes, a lane
per game): submit, score, settle, close. Other stages import :mod:`codemojex.game.api` only."""
