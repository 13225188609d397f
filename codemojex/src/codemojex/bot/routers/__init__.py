"""The command worker's routers, one module per feature (aiogram style): start/help, play,
guess, the inline keyboard, board, me, convert, and the fallback (last)."""
