"""echomq: a flow-controlled job queue on Valkey."""
