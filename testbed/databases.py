"""Throwaway database servers: a temporary directory of their own, a free port, removed on close.

* ``ThrowawayPostgres`` (Debian's ``postgresql``: ``initdb`` + ``pg_ctl``) serves the
  inventory tests, the UI's, and the inventory, load and UI benchmarks' Airflow;
* ``ThrowawayMariaDB`` (Debian's ``mariadb-server``: ``mariadb-install-db`` + ``mariadbd``)
  serves the inventory's MySQL-dialect test. MySQL itself is not packaged for Debian 12; MariaDB
  speaks the dialect SQLAlchemy's ``mysql`` dialect emits, so the inventory reaches it through a
  plain ``mysql+mysqldb://`` (or ``mysql+pymysql://``) URL, exactly as it reaches a MySQL server.
  It runs on a free port on 127.0.0.1 with its socket, pid file and error log in its own directory
  (``--no-defaults``: nothing of /etc/mysql is read), and has database ``airflow`` (utf8mb4) and
  user ``airflow`` (no password). As root it runs as the ``mysql`` user, as Debian's service does.

Both wait (bounded) until they accept connections; ``ThrowawayServer.close`` stops a server and
removes everything.
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
from testbed.processes import stop_group
from testbed.waiting import poll


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

    Subclasses start and ``stop`` it; ``close`` stops it and removes everything.
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
    (``runuser``). ``stop`` and ``start`` keep the data, ``close`` removes it.
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


# -- MariaDB ---------------------------------------------------------------------------------------

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

        last: list[Exception] = []

        def accepting() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self._connect_root().close()
                return True
            except pymysql.err.OperationalError as exc:
                last[:] = [exc]
                return False

        if not poll(accepting, self.START_TIMEOUT, interval=0.2):
            waited = f"{self.START_TIMEOUT:g} s"
            tail = self.log_tail()
            raise RuntimeError(f"mariadbd accepted no connection within {waited} ({last}):\n{tail}")

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
        stop_group(proc, 60)
