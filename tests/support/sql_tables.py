"""The tables a SQLAlchemy statement reads (what SECURITY.md says of the metadata database)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Table
from sqlalchemy.sql import visitors


def tables(stmt: Any) -> set[str]:
    """Every table the statement names: its elements, and its SQL's ``FROM``s and ``JOIN``s (a
    relationship's association table appears only there)."""
    named = {e.name for e in visitors.iterate(stmt) if isinstance(e, Table)}
    in_sql = re.findall(r"(?:FROM|JOIN)\s+\(?\s*([a-z_]+)\b", str(stmt))
    return named | set(in_sql)
