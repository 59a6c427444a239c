"""A throwaway MariaDB server for the inventory's MySQL-dialect test.

MySQL itself is not packaged for Debian 12; its ``mariadb-server`` (``mariadb-install-db`` and
``mariadbd``) speaks the dialect SQLAlchemy's ``mysql`` dialect emits, so the inventory reaches it
through a plain ``mysql+mysqldb://`` (or ``mysql+pymysql://``) URL, exactly as it reaches a MySQL
server. The test's own connections (setup, checks) use ``pymysql``.

:class:`ThrowawayMariaDB` makes its own data directory under /tmp with ``mariadb-install-db``, runs
``mariadbd`` on a free port on 127.0.0.1 with its socket, pid file and error log in the same
directory (``--no-defaults``: nothing of /etc/mysql is read), waits (bounded) until it accepts
connections, and creates database ``airflow`` (utf8mb4) and user ``airflow`` (no password). As
root the server runs as the ``mysql`` user, as Debian's service does. :meth:`close` stops it and
removes everything.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testbed.databases import ThrowawayServer  # noqa: E402 (the repository root, just added)

#: Where Debian puts the server (``/usr/sbin`` is not on a non-root user's PATH).
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/usr/local/sbin"])


def _binary(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name, path=_SEARCH)
        if found:
            return found
    return None


class ThrowawayMariaDB(ThrowawayServer):
    """A MariaDB server in a temporary directory on a free port; user ``airflow``, database ``airflow``."""

    #: How long the server may take to accept connections after it is started.
    START_TIMEOUT = 90.0

    def __init__(self) -> None:
        super().__init__("mariadb")
        self.install_db = _binary("mariadb-install-db", "mysql_install_db")
        self.server = _binary("mariadbd", "mysqld")
        self.socket = self.root / "mariadb.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self._user: list[str] = []
        if os.geteuid() == 0:
            # mariadbd refuses to run as root unless told to; run it as Debian's service user.
            try:
                user = pwd.getpwnam("mysql")
            except KeyError:
                self._user = ["--user=root"]
            else:
                os.chown(self.root, user.pw_uid, user.pw_gid)
                self._user = ["--user=mysql"]

    @staticmethod
    def unavailable() -> str | None:
        """Why no server can be started here, or ``None``."""
        missing = []
        if _binary("mariadb-install-db", "mysql_install_db") is None:
            missing.append("mariadb-install-db")
        if _binary("mariadbd", "mysqld") is None:
            missing.append("mariadbd")
        if missing:
            return (
                f"MariaDB binaries not found ({', '.join(missing)}): apt-get install -y mariadb-server "
                "(scripts/setup dev installs it)"
            )
        # Airflow refuses any mysql URL without mysqlclient (airflow.settings.configure_adapters), and
        # its async engine needs aiomysql; pymysql is the tests' own client (and aiomysql's).
        import importlib.util

        drivers = {"MySQLdb": "mysqlclient", "pymysql": "pymysql", "aiomysql": "aiomysql"}
        absent = [package for module, package in drivers.items() if importlib.util.find_spec(module) is None]
        if absent:
            return f"not installed: {', '.join(absent)} (the dev extra has them: scripts/setup dev)"
        return None

    @property
    def url(self) -> str:
        """Airflow's documented MySQL URL (``mysqlclient``, which Airflow imports for any ``mysql`` URL)."""
        return self.url_for("mysqldb")

    def url_for(self, driver: str) -> str:
        """The SQLAlchemy URL through ``driver`` (``mysqldb``: mysqlclient, ``pymysql``)."""
        return f"mysql+{driver}://airflow@127.0.0.1:{self.port}/airflow?charset=utf8mb4"

    def version(self) -> str:
        """The server's ``VERSION()``, e.g. ``10.11.6-MariaDB-0+deb12u1``."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                return str(cur.fetchone()[0])
        finally:
            conn.close()

    def init(self) -> ThrowawayMariaDB:
        assert self.install_db and self.server
        proc = subprocess.run(
            [
                self.install_db,
                "--no-defaults",
                f"--datadir={self.data}",
                *self._user,
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        self.start()
        conn = self._connect_root()
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE airflow CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
                cur.execute("CREATE USER 'airflow'@'%' IDENTIFIED BY ''")
                cur.execute("GRANT ALL PRIVILEGES ON airflow.* TO 'airflow'@'%'")
            conn.commit()
        finally:
            conn.close()
        return self

    def start(self) -> None:
        assert self.server
        self.logfile.touch()
        if self._user == ["--user=mysql"]:
            user = pwd.getpwnam("mysql")
            os.chown(self.logfile, user.pw_uid, user.pw_gid)
        self.proc = subprocess.Popen(
            [
                self.server,
                "--no-defaults",
                f"--datadir={self.data}",
                *self._user,
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                f"--socket={self.socket}",
                f"--pid-file={self.root / 'mariadb.pid'}",
                f"--log-error={self.logfile}",
                f"--tmpdir={self.root}",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
                "--explicit-defaults-for-timestamp=1",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-buffer-pool-size=64M",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_accepting()

    def _wait_accepting(self) -> None:
        import pymysql

        deadline = time.monotonic() + self.START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self._connect_root().close()
                return
            except pymysql.err.OperationalError as exc:
                last = exc
                time.sleep(0.2)
        waited = f"{self.START_TIMEOUT:g} s"
        raise RuntimeError(f"mariadbd accepted no connection within {waited} ({last}):\n{self.log_tail()}")

    def _connect_root(self) -> Any:
        import pymysql

        return pymysql.connect(unix_socket=str(self.socket), user="root", password="", connect_timeout=5)

    def connect(self) -> Any:
        """A pymysql connection to database ``airflow`` as ``airflow``, over TCP."""
        import pymysql

        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="airflow", database="airflow", charset="utf8mb4"
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM: a clean shutdown; SIGKILL if it takes more than 60 s)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
