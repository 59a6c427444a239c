"""``python -m benchmarks``: see ``benchmarks.run``."""

from .run import main

main()
