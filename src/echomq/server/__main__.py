"""``python -m echomq.server``: an embedded Valkey in the foreground (see :func:`main`)."""

from echomq.server import main

raise SystemExit(main())
