"""Nothing in the shared temp directory is trusted: the retry claims' and worker slots' folders.

Every user of a host may write to the temp directory. What another user (or a mistake) leaves at
the path of a folder store-metrics uses there, a symbolic link, a file, a folder of someone else's
or one anybody may write to, is never followed nor written through: the API server's workers fall
back as documented (each worker decides a retried attempt alone; a worker identity from the process
id), say so once, and keep counting. The hourly clean-up removes only claims it made. A full disk
leaves no claim half written, and the retry is still counted.

Real folders, links and files planted in ``tmp_path``; a foreign owner by ``chown`` (as root); a
full disk as a real 64 KiB tmpfs (as root) and as a real file size limit (``RLIMIT_FSIZE``); no
usable temp directory as read-only mounts over ``/tmp`` and ``/var/tmp`` in a mount namespace of
its own (``unshare``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from store_metrics import logs
from store_metrics.api_server import StoreCalls
from store_metrics.api_server.attribution import TaskAttempt
from store_metrics.api_server.retries import HostClaims
from store_metrics.emitter import AggregatingEmitter

HOST = socket.gethostname().split(".")[0]
NOBODY = 65534
WEEK_AGO = time.time() - 8 * 24 * 3600
RESUMED = "task_state_store.retry_resumed"
TAGS = {"dag_id": "etl", "task_id": "load", "run_type": "scheduled", "operator": "BashOperator"}
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a foreign owner and a mount need root")


@pytest.fixture(autouse=True)
def say_again() -> Iterator[None]:
    """Each test sees the "said once" lines of its own process afresh."""
    logs.forget()
    yield
    logs.forget()


def retried_attempt_read_twice(emitter: AggregatingEmitter, claims: HostClaims) -> tuple[uuid.UUID, int]:
    """One API server worker sees a retried attempt's first read (found) and a second one: the
    ``retry_resumed`` count it makes (0 when another worker's claim was found)."""
    attempt = uuid.uuid4()
    calls = StoreCalls(emitter, lambda ti: TaskAttempt(TAGS, 2), claims=claims)
    scope = {
        "type": "http",
        "path": f"/execution/store/ti/{attempt}/k",
        "root_path": "",
        "ti_token": SimpleNamespace(id=attempt),
    }

    async def run() -> None:
        for _ in range(2):
            calls.count(scope, ("task", "get"), 200, "read_found")
        assert await calls.drain(5)

    asyncio.run(run())
    counted = sum(n for (name, _), n in emitter.snapshot().items() if name == RESUMED)
    return attempt, counted


def week_old(path: Path) -> Path:
    os.utime(path, (WEEK_AGO, WEEK_AGO), follow_symlinks=False)
    return path


# -- the retry claims' folder -------------------------------------------------------------------------


def test_a_planted_link_at_the_claims_folder_is_not_followed_and_the_clean_up_spares_what_it_points_to(
    emitter: AggregatingEmitter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = tmp_path / "someone-elses"
    victim.mkdir()
    theirs = victim / str(uuid.uuid4())  # named like a claim, even
    theirs.write_text("their data")
    week_old(theirs)
    planted = tmp_path / "claims"
    planted.symlink_to(victim)

    _, counted = retried_attempt_read_twice(emitter, HostClaims(planted, sweep_every=0))

    assert counted == 1  # decided alone, counted once
    assert sorted(p.name for p in victim.iterdir()) == [theirs.name]  # nothing made there, nothing swept
    assert theirs.read_text() == "their data"
    assert caplog.text.count("no host-wide claims of retried attempts") == 1
    assert "a symbolic link, not a folder" in caplog.text


def test_a_plain_file_at_the_claims_folder_still_lets_the_retry_be_counted(
    emitter: AggregatingEmitter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    planted = tmp_path / "claims"
    planted.write_text("a file where the folder should be")

    _, counted = retried_attempt_read_twice(emitter, HostClaims(planted))

    assert counted == 1
    assert planted.read_text() == "a file where the folder should be"
    assert "no host-wide claims of retried attempts" in caplog.text and "not a folder" in caplog.text

    planted.unlink()  # once the path is free, the folder is made: this user's alone
    assert HostClaims(planted).claim(uuid.uuid4())
    assert planted.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        pytest.param(NOBODY, 0o777, "owned by uid 65534", marks=as_root, id="foreign-world-writable"),
        pytest.param(NOBODY, 0o700, "owned by uid 65534", marks=as_root, id="foreign"),
        pytest.param(None, 0o777, "others may write to it (mode 777)", id="own-world-writable"),
        pytest.param(None, 0o770, "others may write to it (mode 770)", id="own-group-writable"),
    ],
)
def test_a_claims_folder_that_is_not_this_users_own_is_not_trusted(  # noqa: PLR0917 - parameters
    emitter: AggregatingEmitter,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    owner: int | None,
    mode: int,
    why: str,
) -> None:
    """Someone made the folder first and planted a claim of the attempt: it would suppress the count."""
    folder = tmp_path / "claims"
    folder.mkdir()
    attempt = uuid.uuid4()
    (folder / str(attempt)).write_text("4242 resumed\n")
    if owner is not None:
        os.chown(folder, owner, owner)
    folder.chmod(mode)
    claims = HostClaims(folder)

    assert claims.claim(attempt) is True  # decided here, the planted claim ignored
    _, counted = retried_attempt_read_twice(emitter, claims)
    assert counted == 1
    assert [p.name for p in folder.iterdir()] == [str(attempt)]  # nothing written there
    assert why in caplog.text and caplog.text.count("no host-wide claims") == 1


def test_the_clean_up_removes_only_old_claims_it_made(tmp_path: Path) -> None:
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    outside = tmp_path / "outside.txt"
    outside.write_text("kept")
    old_claim = folder / str(uuid.uuid4())
    old_claim.write_text("1 resumed\n")
    week_old(old_claim)
    planted: list[Path] = [folder / "notes.txt", folder / f"{uuid.uuid4()}.backup"]
    for path in planted:
        path.write_text("not a claim")
    link = folder / str(uuid.uuid4())  # named like a claim, a link to a file elsewhere
    link.symlink_to(outside)
    week_old(outside)
    subfolder = folder / str(uuid.uuid4())
    subfolder.mkdir()
    planted += [link, subfolder]
    if os.geteuid() == 0:
        foreign = folder / str(uuid.uuid4())  # another user's file, named like a claim
        foreign.write_text("theirs")
        os.chown(foreign, NOBODY, NOBODY)
        planted.append(foreign)
    for path in planted:
        week_old(path)

    assert HostClaims(folder, ttl=3600, sweep_every=0).claim(uuid.uuid4())  # a claim sweeps

    left = {p.name for p in folder.iterdir()}
    assert old_claim.name not in left
    assert {p.name for p in planted} <= left
    assert outside.read_text() == "kept"


# -- a full disk -----------------------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A claims folder on a real 64 KiB tmpfs, filled to the last byte."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=False, capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        folder = disk / "claims"
        folder.mkdir(mode=0o700)
        with pytest.raises(OSError, match="No space left on device"):
            (disk / "filler").write_bytes(b"x" * 128 * 1024)
        yield folder
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@as_root
def test_on_a_full_disk_no_empty_claim_is_left_and_the_retry_is_counted(
    emitter: AggregatingEmitter, full_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, counted = retried_attempt_read_twice(emitter, HostClaims(full_disk))

    assert counted == 1
    assert list(full_disk.iterdir()) == []
    assert "No space left on device" in caplog.text


_SHORT_WRITE = """
import os, resource, signal, sys, uuid
from pathlib import Path
from store_metrics.api_server.retries import HostClaims
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is cut short, not fatal
resource.setrlimit(resource.RLIMIT_FSIZE, (5, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
folder = Path(sys.argv[1])
print(HostClaims(folder).claim(uuid.uuid4()), sorted(os.listdir(folder)))
"""


def test_a_claim_cut_short_by_a_file_size_limit_leaves_no_torn_claim(tmp_path: Path) -> None:
    """A claim's text is longer than 5 bytes: the kernel writes 5 of them and stops."""
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-c", _SHORT_WRITE, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "[]"]  # decided here; nothing left in the folder
    assert "a short write (5 of" in done.stderr


# -- the worker slots' folder ---------------------------------------------------------------------------

_SLOT = """
import os, sys
from pathlib import Path
from store_metrics.api_server import worker_slot
print(worker_slot.claim(Path(sys.argv[1])), os.getpid())
"""


def slot_of(folder: Path) -> tuple[str, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _SLOT, str(folder)], capture_output=True, text=True, timeout=60, check=True
    )
    identity, pid = done.stdout.split()
    return identity, pid, done.stderr


def test_a_planted_link_at_the_slots_folder_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "someone-elses"
    victim.mkdir()
    (tmp_path / "slots").symlink_to(victim)

    identity, pid, said = slot_of(tmp_path / "slots")

    assert identity == f"{HOST}-p{pid}"
    assert list(victim.iterdir()) == []
    assert said.count("store-metrics: no worker slot") == 1 and "a symbolic link" in said


@as_root
def test_a_foreign_world_writable_slots_folder_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "slots"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o777)

    identity, pid, said = slot_of(folder)

    assert identity == f"{HOST}-p{pid}"
    assert list(folder.iterdir()) == []
    assert "owned by uid 65534" in said


def test_a_link_planted_as_a_slots_file_is_not_followed(tmp_path: Path) -> None:
    """Even in this user's own folder, a slot's file is never opened through a link."""
    folder = tmp_path / "slots"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    (folder / "slot-0.lock").symlink_to(target)

    identity, _, _ = slot_of(folder)

    assert identity == f"{HOST}-1"  # slot 0 is not usable: the next one is taken
    assert not target.exists()


# -- no usable temp directory at all ----------------------------------------------------------------------

_NO_TEMP = """
import tempfile, uuid
from store_metrics.api_server import worker_metrics
from store_metrics.api_server.retries import HostClaims
try:
    tempfile.gettempdir()
    raise SystemExit("a temp directory is usable")
except FileNotFoundError:
    pass
m = worker_metrics.server_metrics()
print("->", m.worker if m else "off", HostClaims().claim(uuid.uuid4()))
"""


@as_root
def test_without_a_usable_temp_directory_the_api_server_metrics_stay_on(tmp_path: Path) -> None:
    """``/tmp`` and ``/var/tmp`` read-only (a mount namespace of the test's own): the worker takes
    its process id as identity, decides retries alone, and its metrics are made."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    script = tmp_path / "no_temp.py"
    script.write_text(_NO_TEMP)
    shell = (
        "mount -t tmpfs -o ro,size=4k tmpfs /tmp && mount -t tmpfs -o ro,size=4k tmpfs /var/tmp && cd /tmp "
        f'&& exec "{sys.executable}" -c "$SCRIPT"'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    env.update(
        SCRIPT=_NO_TEMP,
        PYTHONPATH=os.pathsep.join(sys.path),
        AIRFLOW__STORE_METRICS__BACKEND="none",
        AIRFLOW__STORE_METRICS__SERVER_METRICS="true",
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", shell],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if done.returncode != 0 and "mount" in done.stderr and "permission" in done.stderr.lower():
        pytest.skip(f"no mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # Airflow's logging may write to either
    worker, claimed = said.split("-> ", 1)[1].split()[:2]
    assert worker.startswith(f"{HOST}-p") and claimed == "True"
    assert said.count("store-metrics: no worker slot") == 1
    assert said.count("no host-wide claims of retried attempts") == 1
    assert "No usable temporary directory" in said
