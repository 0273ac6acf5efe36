#!/usr/bin/env python
r"""Make a private certificate authority and TLS certificates for a Dask cluster.

Dask's TLS is mutual: the scheduler, every worker and every client present a
certificate signed by a CA that the other side trusts, and the scheduler refuses
connections without one. This script writes, into OUTDIR:

* ``ca.pem`` and ``ca-key.pem``: a self-signed certificate authority (keep the key
  private; it is only needed to sign more certificates);
* ``node.pem`` and ``node-key.pem``: one certificate and key, signed by the CA, valid
  for server *and* client authentication, with the given hosts as subject alternative
  names (IP addresses and DNS names). One such certificate can serve the scheduler,
  the workers and the clients;
* with ``--names scheduler worker client``, separate ``NAME.pem``/``NAME-key.pem``
  pairs as well (same CA, same hosts).

Usage::

    python cluster/make_certs.py OUTDIR --hosts 127.0.0.1 localhost scheduler.example.org
    dask scheduler --protocol tls --tls-ca-file OUTDIR/ca.pem \
        --tls-cert OUTDIR/node.pem --tls-key OUTDIR/node-key.pem ...

Requires the ``cryptography`` package. OUTDIR is created with mode 0700; an existing
OUTDIR must belong to you and must not be writable by group or others (it is refused
otherwise). Private keys are written with mode 0600, certificates with 0644, each
through a new randomly named file that is renamed into place.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import secrets
import stat
import sys
from pathlib import Path

__all__ = ["UnsafeDirectoryError", "main", "make_ca", "make_certificate", "make_certs", "write_pem"]


def _new_key(key_type="ec"):
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type must be 'ec' or 'rsa', got {key_type!r}")


def _subject_alternative_names(hosts):
    from cryptography import x509

    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not host or any(c.isspace() for c in host):
                raise ValueError(f"not a host name or IP address: {host!r}") from None
            names.append(x509.DNSName(host))
    return names


def check_days(days):
    """``days`` as a validity in whole days, or a ValueError that says why not.

    Raises
    ------
    ValueError
        ``days`` is not an integer, is below 1 (a certificate valid for 0 days or fewer
        is already expired when written: every TLS connection would be refused), or
        ends after the year 9999.
    """
    if isinstance(days, bool) or not isinstance(days, int):
        raise ValueError(f"days must be a whole number of days >= 1, got {days!r}")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}: a certificate valid for {days} days is already "
                         "expired when it is written, and every TLS connection with it would be refused "
                         "(the default is 825)")
    try:
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days)
    except OverflowError:
        raise ValueError(f"days={days} ends after the year 9999; give fewer days (the default is 825)") from None
    return days


def _validity(days):
    check_days(days)
    now = datetime.datetime.now(datetime.UTC)
    # Backdated a little so that hosts with slightly different clocks accept it.
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


def make_ca(common_name="lswmkc-dask CA", days=3650, key_type="ec"):
    """Create a self-signed certificate authority.

    Parameters
    ----------
    common_name : str
        Subject common name of the CA.
    days : int
        Validity in days.
    key_type : {"ec", "rsa"}
        ECDSA P-256 (default) or RSA 2048 key.

    Returns
    -------
    certificate : cryptography.x509.Certificate
    key : private key object
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _new_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start, end = _validity(days)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_certificate(ca_cert, ca_key, hosts, common_name=None, days=825, key_type="ec"):
    """Create a certificate signed by ``ca_cert`` for TLS servers and clients.

    Parameters
    ----------
    ca_cert : cryptography.x509.Certificate
        The signing CA (from :func:`make_ca`).
    ca_key : private key object
        Its private key.
    hosts : sequence of str
        Subject alternative names: IP addresses (``127.0.0.1``, ``10.0.0.5``) become
        IP entries, anything else a DNS entry (``scheduler.example.org``).
    common_name : str, optional
        Subject common name (default: the first host).
    days : int
        Validity in days.
    key_type : {"ec", "rsa"}
        ECDSA P-256 (default) or RSA 2048 key.

    Returns
    -------
    certificate : cryptography.x509.Certificate
    key : private key object

    Raises
    ------
    ValueError
        No host given, or a host that is neither an IP address nor a name.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    hosts = list(hosts)
    if not hosts:
        raise ValueError("give at least one host (IP address or DNS name)")
    key = _new_key(key_type)
    start, end = _validity(days)
    public = key.public_key()
    is_rsa = isinstance(key, rsa.RSAPrivateKey)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=is_rsa,
                data_encipherment=False, key_agreement=not is_rsa, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(_subject_alternative_names(hosts)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


class UnsafeDirectoryError(PermissionError):
    """The output directory could be written by another user (or is not ours)."""


#: Mode of a directory made by :func:`make_certs`: only its owner can list or change it.
DIR_MODE = 0o700
#: Mode of a private key file.
KEY_MODE = 0o600
#: Mode of a certificate file (public).
CERT_MODE = 0o644


def _describe(path, st):
    return f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})"


def _check_private_dir(path, st):
    """Refuse a directory that is not ours or that group/others can write."""
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{path} is not a directory")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise UnsafeDirectoryError(
            f"refusing to write keys into {_describe(path, st)}: it is not owned by you (uid {uid}); "
            "choose a directory of your own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeDirectoryError(
            f"refusing to write keys into {_describe(path, st)}: it is writable by group/others, who "
            f"could replace or read the files written there; run `chmod 700 {path}` or choose a new directory"
        )


def _make_dirs(path):
    """Create ``path`` with mode 0700 (and missing parents with 0755), whatever the umask."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        mode = DIR_MODE if d == path else 0o755  # never group/other-writable: mode & ~umask
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue  # made by someone else meanwhile: the checks below decide
        if d == path:
            os.chmod(d, DIR_MODE)  # exactly 0700 even under an unusual umask (e.g. 0200)


def _open_private_dir(path, create):
    """A file descriptor of the output directory, after checking owner and mode.

    Every later file operation is relative to this descriptor, so renaming or replacing
    the path after the check cannot redirect the writes.
    """
    path = Path(path)
    if create:
        _make_dirs(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        _check_private_dir(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_file(dir_fd, name, data, mode):
    """Write ``data`` to ``name`` in the directory ``dir_fd`` atomically with ``mode``.

    The data go to a new file with a random name (``O_CREAT | O_EXCL | O_NOFOLLOW``: a
    file or symbolic link planted under any name is never opened or followed), which is
    given ``mode`` before any byte is written, flushed to disk and then renamed over
    ``name``.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, flags, mode & 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"could not create a temporary file for {name}")
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _pem_bytes(cert=None, key=None):
    from cryptography.hazmat.primitives import serialization

    if (cert is None) == (key is None):
        raise ValueError("give exactly one of cert and key")
    if cert is not None:
        return cert.public_bytes(serialization.Encoding.PEM), CERT_MODE
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return data, KEY_MODE


def write_pem(path, cert=None, key=None):
    """Write a certificate (mode 0644) or a private key (unencrypted PKCS#8, mode 0600) as PEM.

    The file is written under a new random name in the same directory and renamed into
    place (see :func:`make_certs`); the directory must exist, belong to the current
    user and not be writable by group or others.

    Parameters
    ----------
    path : str or Path
        File to write (replaced if it exists).
    cert : cryptography.x509.Certificate, optional
    key : private key object, optional
        Exactly one of ``cert`` and ``key``.

    Returns
    -------
    Path

    Raises
    ------
    UnsafeDirectoryError
        The directory is not the current user's or is writable by group/others.
    """
    data, mode = _pem_bytes(cert, key)
    path = Path(path)
    dir_fd = _open_private_dir(path.parent, create=False)
    try:
        _write_file(dir_fd, path.name, data, mode)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def make_certs(outdir, hosts=("127.0.0.1", "localhost"), names=(), days=825, key_type="ec", overwrite=False):
    """Write a CA and certificates signed by it into ``outdir``.

    ``outdir`` is created with mode 0700 (whatever the umask); an existing ``outdir``
    must belong to the current user and must not be writable by group or others
    (another user who can create files there could substitute or read the keys). Each
    file is written to a new randomly named file (exclusive create, never following an
    existing file or link), given its mode (0600 for keys, 0644 for certificates)
    before any data, flushed, and renamed into place.

    Parameters
    ----------
    outdir : str or Path
        Created if missing.
    hosts : sequence of str
        Subject alternative names of every certificate (IPs and DNS names).
    names : sequence of str
        Extra certificates ``NAME.pem``/``NAME-key.pem`` besides ``node.pem`` (e.g.
        ``("scheduler", "worker", "client")``).
    days : int
        Validity of the certificates, at least 1 (the CA gets ten years, or ``days``
        if that is longer, so that it does not expire before them).
    key_type : {"ec", "rsa"}
    overwrite : bool
        Replace existing files; otherwise an existing ``ca.pem`` is an error (a new CA
        would invalidate every certificate already handed out).

    Returns
    -------
    dict
        ``{"ca": Path, "ca_key": Path, "node": Path, "node_key": Path, NAME: Path,
        NAME + "_key": Path, ...}``.

    Raises
    ------
    FileExistsError
        ``outdir/ca.pem`` exists and ``overwrite`` is False.
    UnsafeDirectoryError
        ``outdir`` exists and is not the current user's or is writable by group/others.
    ValueError
        Bad host or name, or ``days`` below 1 (:func:`check_days`); nothing is written.
    """
    check_days(days)
    outdir = Path(outdir)
    all_names = ["node", *[n for n in names if n != "node"]]
    for n in all_names:
        if not n or "/" in n or n.startswith(".") or n in ("ca", "ca-key"):
            raise ValueError(f"bad certificate name {n!r}")
    dir_fd = _open_private_dir(outdir, create=True)
    try:
        try:
            os.stat("ca.pem", dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if not overwrite:
                raise FileExistsError(f"{outdir / 'ca.pem'} exists (pass --overwrite to make a new CA)")
        ca_cert, ca_key = make_ca(days=max(3650, days), key_type=key_type)
        files = {"ca": ("ca.pem", ca_cert, None), "ca_key": ("ca-key.pem", None, ca_key)}
        for n in all_names:
            cert, key = make_certificate(
                ca_cert, ca_key, hosts, common_name=f"lswmkc-dask {n}", days=days, key_type=key_type
            )
            files[n] = (f"{n}.pem", cert, None)
            files[f"{n}_key"] = (f"{n}-key.pem", None, key)
        paths = {}
        for label, (name, cert, key) in files.items():
            data, mode = _pem_bytes(cert, key)
            _write_file(dir_fd, name, data, mode)
            paths[label] = outdir / name
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return paths


def _days(text):
    """``--days``: an integer >= 1 (argparse reports the ValueError's message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of days: {text!r}") from None
    try:
        return check_days(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv=None):
    """Command line: ``python cluster/make_certs.py OUTDIR --hosts HOST ...``; returns 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", help="directory for ca.pem, ca-key.pem, node.pem, node-key.pem")
    p.add_argument("--hosts", nargs="+", default=["127.0.0.1", "localhost"],
                   help="IP addresses and DNS names the certificates are valid for (default: 127.0.0.1 localhost)")
    p.add_argument("--names", nargs="*", default=[],
                   help="extra certificates NAME.pem/NAME-key.pem, e.g. scheduler worker client")
    p.add_argument("--days", type=_days, default=825, help="validity of the certificates in days, >= 1 (default 825)")
    p.add_argument("--key-type", choices=("ec", "rsa"), default="ec", help="ECDSA P-256 (default) or RSA 2048")
    p.add_argument("--overwrite", action="store_true", help="replace an existing CA and certificates")
    args = p.parse_args(argv)
    try:
        paths = make_certs(args.outdir, args.hosts, args.names, args.days, args.key_type, args.overwrite)
    except (OSError, ValueError) as exc:
        print(f"make_certs: error: {exc}", file=sys.stderr)
        return 2
    for path in paths.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
