"""Which Airflow this is, and what of store-metrics works on it (``store-metrics check`` prints it).

``TESTED`` is the one list of the Airflow releases CI runs the tests on; ``scripts/matrix``
reads the 3.3 releases from it (and looks the newest 3.4 release up on the package index when it
runs). ``docs/airflow-versions.md`` says what is tested on each. Only the standard library is
imported at module level: ``scripts/matrix`` loads this file by path, without the package.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from typing import Final

#: What the ``airflow`` extra accepts (pyproject.toml).
SUPPORTED: Final = ">=3.3.0,<3.5"
#: The releases the version matrix runs on (scripts/matrix; the newest 3.4 release when it runs).
TESTED: Final = ("3.3.0", "3.3.1", "3.3.2", "3.4.0b2")
#: The series whose newest release the matrix looks up at run time.
NEWEST_OF: Final = "3.4"

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def airflow_version() -> str | None:
    """The installed Airflow's version (``apache-airflow-core``, else ``apache-airflow``), or ``None``."""
    for distribution in ("apache-airflow-core", "apache-airflow"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return None


def is_supported(release: str) -> bool:
    """Whether ``release`` is in ``SUPPORTED`` (a pre-release of 3.3.0 or 3.5.0 is not)."""
    match = _RELEASE.match(release)
    if match is None:
        return False
    numbers = tuple(int(n) for n in match.groups())
    final_or_later = release == match.group(0) or numbers > (3, 3, 0)
    return (3, 3, 0) <= numbers < (3, 5, 0) and final_or_later


def describe_version(release: str | None) -> str:
    """One line: the Airflow release, and whether store-metrics' tests run on it."""
    tested = ", ".join(TESTED)
    if release is None:
        return "airflow: not installed in this environment (check it where tasks and the API server run)"
    if release in TESTED:
        return f"airflow: apache-airflow {release}, a tested release (tested: {tested})"
    if is_supported(release):
        return (
            f"airflow: apache-airflow {release}, supported ({SUPPORTED}) but not a tested release "
            f"(tested: {tested})"
        )
    return (
        f"warning: airflow: apache-airflow {release} is not supported: store-metrics supports "
        f"apache-airflow{SUPPORTED} (tested: {tested})"
    )


def report() -> list[str]:
    """What ``store-metrics check`` says about this Airflow: its release, the triggerer, multi-team."""
    release = airflow_version()
    lines = [describe_version(release)]
    if release is None:
        return lines
    try:
        from .plugin import describe_server_registration
        from .triggerer import describe_triggerer

        lines.append(describe_triggerer())
        registration = describe_server_registration()
    except Exception as exc:  # an Airflow that does not import here: the check goes on without it
        lines.append(
            f"airflow: cannot tell what counts on it, it does not load here: {type(exc).__name__}: {exc}"
        )
        return lines
    if registration:
        lines.append(registration)
    return lines
