"""`lswmkc` over TLS: a `dask scheduler` and workers started with the commands of
cluster/README.md's TLS recipe (section f, moved to 127.0.0.1), with certificates made at
run time by ``cluster/make_certs.py``; unauthenticated and plaintext clients are refused,
and no process of the recipe listens beyond the loopback interface (its dashboards are
plain HTTP without authentication)."""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
from _helpers import CLUSTER, alive, env, lswmkc

N_WORKERS = 2


def _dask():
    exe = shutil.which("dask", path=env()["PATH"])
    assert exe, "the `dask` command is not installed"
    return exe


def _make_certs_module():
    spec = importlib.util.spec_from_file_location("lswmkc_make_certs", CLUSTER / "make_certs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recipe_commands():
    """The ``dask scheduler`` and ``dask worker`` commands of cluster/README.md section (f),
    each as a list of arguments (continuation lines joined)."""
    text = (CLUSTER / "README.md").read_text()
    section = text.split("## (f) TLS", 1)[1].split("\n## ", 1)[0]
    commands = {}
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            args = shlex.split(line, comments=True)
            if args[:2] in (["dask", "scheduler"], ["dask", "worker"]):
                commands.setdefault(args[1], args[2:])
    assert set(commands) == {"scheduler", "worker"}, f"cluster/README.md (f): no dask scheduler/worker command: {commands}"
    return commands["scheduler"], commands["worker"]


def _on_this_machine(args, certs, address=None):
    """The recipe's arguments for a test on 127.0.0.1: its host 127.0.0.1, free ports
    (port 0), one worker per process, the test's certificates, and ``address`` as the
    scheduler's address. A dashboard address keeps its host if that is the loopback
    interface, and is 0.0.0.0 otherwise (as exposed as the cluster's own address)."""
    files = {"--tls-ca-file": certs.ca, "--tls-cert": certs.cert, "--tls-key": certs.key}
    out = []
    for i, arg in enumerate(args):
        flag = args[i - 1] if i else None
        if flag in files:
            arg = str(files[flag])
        elif flag == "--port":
            arg = "0"
        elif flag == "--nworkers":
            arg = "1"
        elif flag == "--dashboard-address":  # a host other than the loopback stays exposed: 0.0.0.0
            host = arg.rsplit(":", 1)[0] if ":" in arg else ""
            out.append(f"{host if host in ('127.0.0.1', 'localhost', '[::1]') else '0.0.0.0'}:0")
            continue
        elif arg.startswith("tls://") and address is not None:
            arg = address
        out.append(arg.replace("10.0.0.5", "127.0.0.1"))
    return out


def _reap(popens):
    """Kill and wait for any subprocess still running (after a failure)."""
    for p in popens:
        if p.poll() is None:
            p.kill()
        try:
            p.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            pass


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    make_certs = _make_certs_module()
    good = make_certs.make_certs(tmp_path_factory.mktemp("certs"), hosts=["127.0.0.1", "localhost"])
    rogue = make_certs.make_certs(tmp_path_factory.mktemp("rogue-certs"), hosts=["127.0.0.1"])
    return SimpleNamespace(ca=good["ca"], cert=good["node"], key=good["node_key"], rogue=rogue)


@pytest.fixture(scope="module")
def tls_cluster(certs, tmp_path_factory):
    """`dask scheduler --protocol tls` and 2 TLS workers on 127.0.0.1 (separate processes)."""
    from distributed import Client

    from lswmkc_dask.engine.cluster import make_security

    d = tmp_path_factory.mktemp("tls-cluster")
    scheduler_args, worker_args = _recipe_commands()
    popens, logs = [], []

    def start(args, name):
        log = open(d / f"{name}.log", "w")
        logs.append(log)
        popens.append(subprocess.Popen(
            [_dask(), *args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=env(),
        ))

    def tree():
        procs = []
        for p in popens:
            try:
                proc = psutil.Process(p.pid)
                procs += [proc, *proc.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        return procs

    procs = []
    try:
        sched_file = d / "scheduler.json"
        start(["scheduler", *_on_this_machine(scheduler_args, certs), "--scheduler-file", str(sched_file)],
              "scheduler")
        deadline = time.monotonic() + 60
        address = None
        while address is None:
            assert popens[0].poll() is None, (d / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "no scheduler file after 60 s"
            try:
                address = json.loads(sched_file.read_text())["address"]
            except (FileNotFoundError, ValueError, KeyError):
                time.sleep(0.2)
        assert address.startswith("tls://127.0.0.1:")
        for i in range(N_WORKERS):
            start(["worker", *_on_this_machine(worker_args, certs, address), "--host", "127.0.0.1",
                   "--memory-limit", "2GiB", "--name", f"tls-{i}", "--death-timeout", "60"], f"worker-{i}")
        security = make_security(str(certs.ca), str(certs.cert), str(certs.key))
        with Client(address, security=security, timeout="30s") as client:
            client.wait_for_workers(N_WORKERS, timeout=90)
            workers = list(client.scheduler_info()["workers"])
        procs = tree()
        yield SimpleNamespace(address=address, port=int(address.rsplit(":", 1)[1]), dir=d, workers=workers,
                              processes=procs)
    finally:
        procs = procs or tree()
        for p in reversed(popens):  # workers first, then the scheduler
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        _, left = psutil.wait_procs(alive(procs), timeout=20)
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        for p in popens:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for log in logs:
            log.close()
        left = alive(procs)
        assert not left, f"TLS cluster processes left running: {left}"


def test_certificates(certs):
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    cert = x509.load_pem_x509_certificate(Path(certs.cert).read_bytes())
    ca = x509.load_pem_x509_certificate(Path(certs.ca).read_bytes())
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku and ExtendedKeyUsageOID.CLIENT_AUTH in eku
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert Path(certs.key).stat().st_mode & 0o077 == 0  # private key not readable by others
    # The command line refuses to overwrite an existing CA.
    proc = subprocess.run([sys.executable, str(CLUSTER / "make_certs.py"), str(Path(certs.ca).parent)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2 and "exists" in proc.stderr


def test_recipe_listens_on_loopback_only(tls_cluster):
    """The recipe's plain-HTTP endpoints (dashboard, health, metrics: no TLS, no login)
    are bound to 127.0.0.1: with ``--host 127.0.0.1`` for the TLS ports, nothing of the
    scheduler, nannies or workers listens on any other address (Dask's default is
    0.0.0.0:8787 for the scheduler's dashboard, even with ``--no-dashboard``)."""
    listening = []
    for proc in tls_cluster.processes:
        try:
            connections = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        listening += [(proc.pid, c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= 1 + 2 * N_WORKERS, listening  # the scheduler's TLS port, each worker's and nanny's
    exposed = [x for x in listening if not ipaddress.ip_address(x[1]).is_loopback]
    assert not exposed, f"listening beyond the loopback interface (pid, address, port): {exposed}"


def test_fit_over_tls(tls_cluster, certs, reference, tmp_path):
    out = tmp_path / "fit"
    proc = lswmkc("fit", "--dataset", "yale", "--alpha", "8", "--scheduler", tls_cluster.address,
                  "--tls-ca-file", certs.ca, "--tls-cert", certs.cert, "--tls-key", certs.key,
                  "--output", out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert f"{N_WORKERS} workers at {tls_cluster.address}" in proc.stdout  # "ran on" (stderr: --quiet)
    report = json.loads((out / "report.json").read_text())
    assert report["n_iter"] == 20
    assert report["n_workers"] == N_WORKERS
    np.testing.assert_allclose(report["kernel_weights"], reference["omega"][reference["alphas"].index(8.0)], atol=1e-6)


# Each refused connection is tried in its own interpreter: a failed distributed.Client
# left for the garbage collector can deadlock a later Client in the same process.
_ATTEMPT = r"""
import json, sys
from distributed import Client, Security
address, ca, cert, key = sys.argv[1:5]
security = None if ca == "-" else Security(
    tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
kwargs = {} if security is None else {"security": security}
try:
    client = Client(address, timeout="5s", **kwargs)
except BaseException as exc:
    print(json.dumps({"connected": False, "error": type(exc).__name__, "oserror": isinstance(exc, OSError),
                      "message": str(exc)[:300]}))
else:
    client.close()
    print(json.dumps({"connected": True}))
"""


def test_unauthenticated_clients_are_refused(tls_cluster, certs):
    rogue = certs.rogue
    attempts = {
        # plaintext TCP to the TLS port
        "tcp": (f"tcp://127.0.0.1:{tls_cluster.port}", "-", "-", "-"),
        # TLS without any security settings
        "tls-without-security": (tls_cluster.address, "-", "-", "-"),
        # a client certificate signed by another CA
        "foreign-client-cert": (tls_cluster.address, certs.ca, rogue["node"], rogue["node_key"]),
        # a client that trusts another CA (the scheduler's certificate is rejected)
        "foreign-ca": (tls_cluster.address, rogue["ca"], rogue["node"], rogue["node_key"]),
        # control: the right files connect
        "valid": (tls_cluster.address, certs.ca, certs.cert, certs.key),
    }
    procs = {
        name: subprocess.Popen([sys.executable, "-c", _ATTEMPT, *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env())
        for name, args in attempts.items()
    }
    results = {}
    try:
        for name, p in procs.items():
            try:
                stdout, stderr = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name}: the client neither connected nor failed within 60 s") from None
            assert p.returncode == 0, f"{name}: {stderr}"
            results[name] = json.loads(stdout.strip().splitlines()[-1])
    finally:
        _reap(procs.values())
    assert results["valid"]["connected"]
    for name in ("tcp", "tls-without-security", "foreign-client-cert", "foreign-ca"):
        assert not results[name]["connected"], name
    assert results["tcp"]["oserror"], results["tcp"]  # CommClosedError/TimeoutError are OSErrors
    assert results["foreign-client-cert"]["oserror"], results["foreign-client-cert"]
    assert results["foreign-ca"]["oserror"], results["foreign-ca"]
    log = (tls_cluster.dir / "scheduler.log").read_text()
    assert "TLS handshake failed" in log


def test_tls_client_without_certificate_is_refused(tls_cluster, certs):
    """The scheduler requires a client certificate (mutual TLS), not just encryption."""

    def talk(with_certificate):
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.check_hostname = False
        if with_certificate:
            ctx.load_cert_chain(str(certs.cert), str(certs.key))
        with socket.create_connection(("127.0.0.1", tls_cluster.port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as conn:  # verifies the scheduler's certificate
                conn.sendall(b"\x00" * 8)
                return conn.recv(1)

    assert talk(True)  # control: with a certificate the scheduler answers
    # Without one it sends a "certificate required" alert (or, depending on timing,
    # just closes the connection): nothing is ever answered.
    try:
        answer = talk(False)
    except (ssl.SSLError, ConnectionError) as exc:
        answer = exc
    assert isinstance(answer, (ssl.SSLError, ConnectionError)) or answer == b"", answer


def test_cli_without_tls_settings_fails(tls_cluster, certs, tmp_path):
    environ = env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="10s")
    base = ["fit", "--dataset", "yale", "--alpha", "8", "--quiet"]
    runs = {
        "no-tls-flags": [*base, "--scheduler", tls_cluster.address, "--output", tmp_path / "a"],
        "plaintext": [*base, "--scheduler", f"tcp://127.0.0.1:{tls_cluster.port}", "--output", tmp_path / "b"],
        "partial-flags": [*base, "--scheduler", tls_cluster.address, "--tls-ca-file", certs.ca,
                          "--output", tmp_path / "c"],
    }
    procs = {
        name: subprocess.Popen([sys.executable, "-m", "lswmkc_dask.cli", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environ)
        for name, args in runs.items()
    }
    results = {}
    try:
        for name, p in procs.items():
            try:
                results[name] = (*p.communicate(timeout=120), p.returncode)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name}: lswmkc did not exit within 120 s") from None
    finally:
        _reap(procs.values())
    for name, (_, stderr, rc) in results.items():
        assert rc != 0, f"{name} exited 0:\n{stderr}"
        assert not (tmp_path / {"no-tls-flags": "a", "plaintext": "b", "partial-flags": "c"}[name]).exists()
    _, stderr, rc = results["partial-flags"]
    assert rc == 2 and "TLS needs a CA file, a certificate and a key" in stderr
