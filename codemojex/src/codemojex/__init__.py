"""codemojex: a Telegram code-breaking game on echomq."""
