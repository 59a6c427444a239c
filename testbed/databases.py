"""Throwaway database servers: a temporary directory of their own, a free port, removed on close.

:class:`ThrowawayPostgres` (Debian's ``postgresql``: ``initdb`` + ``pg_ctl``) serves the inventory
tests and benchmark and the load benchmark's Airflow; :class:`ThrowawayServer` is the base that
``tests/support/mariadb.py`` builds its MariaDB on.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from testbed.ports import free_port


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]), reverse=True
    )
    return candidates[0] if candidates else None


class ThrowawayServer:
    """A database server of its own: a temporary directory (data and log), a free port.

    Subclasses start and :meth:`stop` it; :meth:`close` stops it and removes everything.
    """

    def __init__(self, name: str) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"store-metrics-{name}-"))
        self.data = self.root / "data"
        self.logfile = self.root / f"{name}.log"

    def stop(self) -> None:
        raise NotImplementedError

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class ThrowawayPostgres(ThrowawayServer):
    """A PostgreSQL server in a temporary directory on a free port; user ``airflow``, database ``airflow``.

    ``initdb`` and ``postgres`` refuse to run as root: as root they run as the ``postgres`` user
    (``runuser``). :meth:`stop` and :meth:`start` keep the data, :meth:`close` removes it.
    """

    def __init__(self) -> None:
        super().__init__("postgres")
        self.initdb = _pg_bin("initdb")
        self.pg_ctl = _pg_bin("pg_ctl")
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @staticmethod
    def unavailable() -> str | None:
        """Why no server can be started here, or ``None``."""
        missing = [n for n in ("initdb", "pg_ctl", "postgres") if _pg_bin(n) is None]
        if missing:
            return f"PostgreSQL binaries not found ({', '.join(missing)}): apt-get install -y postgresql"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to run the server as"
            if not shutil.which("runuser"):
                return "running as root and runuser is not installed"
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            return "psycopg2 is not installed: pip install psycopg2-binary"
        return None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {proc.stdout}{proc.stderr}{self.log_tail()}")

    def init(self) -> ThrowawayPostgres:
        assert self.initdb and self.pg_ctl
        self._run(
            self.initdb, "-D", str(self.data), "-A", "trust", "-U", "airflow", "-E", "UTF8", "--no-sync"
        )
        self.start()
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE airflow")
        conn.close()
        return self

    def start(self) -> None:
        assert self.pg_ctl
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.logfile), "-w", "start")

    def stop(self) -> None:
        assert self.pg_ctl
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def connect(self) -> Any:
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="airflow")
