"""``cluster/make_certs.py`` writes its keys safely: a 0700 directory whatever the
umask, 0600 keys, no predictable temporary file that another user could plant, and no
output directory that another user can write."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import CLUSTER, env

MAKE_CERTS = CLUSTER / "make_certs.py"
KEYS = ("ca-key.pem", "node-key.pem")
CERTS = ("ca.pem", "node.pem")
#: A user id that is not ours (``nobody``), for files "planted by another user".
OTHER_UID = 65534
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")


def make_certs(outdir, *args, umask=None):
    """Run ``python cluster/make_certs.py OUTDIR ...`` as cluster/README.md documents it."""
    preexec = None if umask is None else (lambda: os.umask(umask))
    return subprocess.run(
        [sys.executable, str(MAKE_CERTS), str(outdir), *args], capture_output=True, text=True,
        check=False, timeout=120, env=env(), preexec_fn=preexec,
    )


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def module():
    spec = importlib.util.spec_from_file_location("lswmkc_make_certs_test", MAKE_CERTS)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def assert_private_key(path):
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1, path
    assert st.st_uid == os.geteuid()
    assert mode(path) == 0o600, f"{path}: {mode(path):o}"
    load_pem_private_key(Path(path).read_bytes(), password=None)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=lambda m: f"umask{m:03o}")
def test_modes_whatever_the_umask(tmp_path, umask):
    out = tmp_path / "new" / "certs"
    proc = make_certs(out, "--hosts", "127.0.0.1", "localhost", "--names", "scheduler", umask=umask)
    assert proc.returncode == 0, proc.stderr
    assert mode(out) == 0o700
    assert not mode(out.parent) & 0o022  # a parent made on the way is not writable by others either
    for name in (*KEYS, "scheduler-key.pem"):
        assert_private_key(out / name)
    for name in (*CERTS, "scheduler.pem"):
        assert mode(out / name) == 0o644
    # Nothing else (no temporary files) is left behind.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*KEYS, *CERTS, "scheduler.pem", "scheduler-key.pem"]
    )
    assert sorted(proc.stdout.split()) == sorted(str(out / p) for p in os.listdir(out))


def _plant(directory, outside):
    """What another user might have left in the directory: the old code's temporary
    names as a file (with content) and as symbolic links to files outside."""
    planted = {}
    f = directory / ".ca-key.pem.tmp"
    f.write_bytes(b"planted by another user\n")
    os.chmod(f, 0o666)
    if IS_ROOT:
        os.chown(f, OTHER_UID, OTHER_UID)
    planted[f] = f.read_bytes()
    target = outside / "stolen-node-key"
    target.write_bytes(b"")
    os.chmod(target, 0o666)
    link = directory / ".node-key.pem.tmp"
    link.symlink_to(target)
    dangling = directory / ".ca.pem.tmp"
    dangling.symlink_to(outside / "created-through-link")
    return planted, target, link, dangling


def test_planted_temporary_files_do_not_receive_the_key(tmp_path):
    out = tmp_path / "certs"
    out.mkdir(mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    planted, target, link, dangling = _plant(out, outside)
    before = {p: os.lstat(p) for p in planted}

    proc = make_certs(out, umask=0)
    assert proc.returncode == 0, proc.stderr

    for name in KEYS:
        assert_private_key(out / name)
    key_inodes = {os.lstat(out / n).st_ino for n in KEYS}
    for p, content in planted.items():
        st = os.lstat(p)
        assert p.read_bytes() == content  # untouched ...
        assert (st.st_ino, st.st_uid, st.st_mode, st.st_nlink) == (
            before[p].st_ino, before[p].st_uid, before[p].st_mode, before[p].st_nlink)
        assert st.st_ino not in key_inodes  # ... and not the key file (no hard link)
    assert target.read_bytes() == b""  # nothing written through the links
    assert link.is_symlink() and dangling.is_symlink()
    assert not (outside / "created-through-link").exists()
    key_text = (out / "ca-key.pem").read_bytes()
    for p in outside.iterdir():
        assert key_text not in p.read_bytes()
    # Besides the planted names, only the four outputs.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*KEYS, *CERTS, ".ca-key.pem.tmp", ".node-key.pem.tmp", ".ca.pem.tmp"]
    )


def test_links_at_the_final_names_are_replaced_not_followed(tmp_path):
    out = tmp_path / "certs"
    out.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    (out / "ca-key.pem").symlink_to(target)
    proc = make_certs(out)
    assert proc.returncode == 0, proc.stderr
    assert_private_key(out / "ca-key.pem")
    assert target.read_bytes() == b""


@pytest.mark.parametrize("dir_mode", [0o777, 0o1777, 0o770, 0o722], ids=lambda m: f"mode{m:04o}")
def test_directory_writable_by_others_is_refused(tmp_path, dir_mode):
    out = tmp_path / "shared"
    out.mkdir()
    os.chmod(out, dir_mode)
    planted, target, _, _ = _plant(out, tmp_path)
    proc = make_certs(out)
    assert proc.returncode == 2
    assert str(out) in proc.stderr and f"mode {dir_mode:04o}" in proc.stderr, proc.stderr
    assert "writable by group/others" in proc.stderr
    assert "Traceback" not in proc.stderr
    # Nothing written: no key, the planted files as they were, the mode unchanged.
    assert sorted(p.name for p in out.iterdir()) == [".ca-key.pem.tmp", ".ca.pem.tmp", ".node-key.pem.tmp"]
    for p, content in planted.items():
        assert p.read_bytes() == content
    assert target.read_bytes() == b""
    assert mode(out) == dir_mode


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give a directory to another user")
def test_directory_of_another_user_is_refused(tmp_path):
    out = tmp_path / "theirs"
    out.mkdir(mode=0o755)
    os.chown(out, OTHER_UID, OTHER_UID)
    proc = make_certs(out)
    assert proc.returncode == 2
    assert str(out) in proc.stderr and "not owned by you" in proc.stderr and "0755" in proc.stderr
    assert list(out.iterdir()) == []


def test_directory_of_another_user_is_refused_in_process(tmp_path, monkeypatch):
    m = module()
    out = tmp_path / "certs"
    out.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(out).st_uid + 1)
    with pytest.raises(m.UnsafeDirectoryError, match="not owned by you"):
        m.make_certs(out)
    assert list(out.iterdir()) == []


def test_write_pem_checks_the_directory(tmp_path):
    m = module()
    _, key = m.make_ca()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(m.UnsafeDirectoryError, match="0777"):
        m.write_pem(shared / "k.pem", key=key)
    assert list(shared.iterdir()) == []
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    assert_private_key(m.write_pem(own / "k.pem", key=key))
    assert [p.name for p in own.iterdir()] == ["k.pem"]


def test_existing_ca_is_kept_without_overwrite(tmp_path):
    out = tmp_path / "certs"
    assert make_certs(out).returncode == 0
    before = (out / "ca-key.pem").read_bytes()
    proc = make_certs(out)
    assert proc.returncode == 2 and "exists" in proc.stderr
    assert (out / "ca-key.pem").read_bytes() == before
    proc = make_certs(out, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert (out / "ca-key.pem").read_bytes() != before
    assert_private_key(out / "ca-key.pem")


def test_days_below_one_are_refused_before_anything_is_written(tmp_path):
    """``--days 0`` used to write certificates that had expired when written."""
    import datetime

    from cryptography import x509

    out = tmp_path / "certs"
    for days in ("0", "-5"):
        proc = make_certs(out, "--days", days)
        assert proc.returncode == 2, proc.stdout
        assert f"argument --days: days must be at least 1, got {days}: a certificate valid for {days} days is " \
               "already expired" in proc.stderr, proc.stderr
        assert not out.exists()  # not even the directory
    m = module()
    with pytest.raises(ValueError, match="days must be at least 1, got 0"):
        m.make_certs(out, days=0)
    with pytest.raises(ValueError, match="ends after the year 9999"):
        m.make_certs(out, days=10**8)
    assert not out.exists()
    # One day is valid now; a validity beyond the CA's ten years extends the CA with it.
    now = datetime.datetime.now(datetime.UTC)
    paths = m.make_certs(out, days=1)
    cert = x509.load_pem_x509_certificate(paths["node"].read_bytes())
    assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
    assert cert.not_valid_after_utc - now > datetime.timedelta(hours=23)
    paths = m.make_certs(tmp_path / "long", days=5000)
    ca, cert = (x509.load_pem_x509_certificate(paths[k].read_bytes()) for k in ("ca", "node"))
    assert ca.not_valid_after_utc >= cert.not_valid_after_utc
