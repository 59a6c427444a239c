"""``python -m generators``: write (or ``--check``) everything generated in the repository, in one go.

The one command after a hand edit (a counter, a panel, an alert, a setting): the shipped files of the
repository (``store-metrics export --out .``: collector/, dashboards/, helm/, kubernetes/, datadog/),
the package's ``provider_info.json``, then the docs' generated blocks (which read both). With
``--check`` nothing is written and the exit code is 1 if any of them is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from store_metrics.shipped import export

from . import docs, provider_info
from .docs import ROOT


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything is stale")
    check = parser.parse_args(argv).check
    flag = ["--check"] if check else []
    results = [
        export.run(ROOT, check=check),
        provider_info.main(flag),
        docs.main(flag),
    ]
    return 1 if any(results) else 0


if __name__ == "__main__":
    sys.exit(main())
