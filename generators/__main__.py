"""``python -m generators``: write (or ``--check``) the dashboard templates."""

from __future__ import annotations

from .templates import main

raise SystemExit(main())
