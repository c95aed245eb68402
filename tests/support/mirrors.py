"""Real servers for remote sources, on loopback: nginx serving a folder (with Range requests), a
fault-injecting TCP proxy in front of it, and moto's S3 server.

The proxy forwards each connection to its upstream and counts the response bytes it passes on.
`plan` holds what the next connections meet, one entry each, then they pass untouched:
`("cut", N)` closes the connection after N response bytes, `("stall", S)` passes the request on
and sends nothing back for S seconds before closing, `("503", S)` answers HTTP 503 with
`Retry-After: S` itself. `rate` (bytes/s, 0 = unlimited) slows every response down.

With `tls=True` nginx speaks HTTPS with a certificate for 127.0.0.1 that `self_signed` makes;
the proxy passes the encrypted bytes on untouched (its URL keeps the scheme), so a cut breaks
the TLS stream mid-record, and a client trusts the server by naming the certificate
(REQUESTS_CA_BUNDLE, SSL_CERT_FILE).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.environment import unavailable
from support.processes import stop_group
from support.servers import free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on port {port} in 30 s")


@contextmanager
def nginx(folder: Path, work: Path, tls: bool = False) -> Iterator[str]:
    """nginx serving `folder` on a free loopback port; yields its base URL (https:// with
    `tls`, the certificate in `work/cert.pem`)."""
    if NGINX is None:
        unavailable("nginx is not installed (apt-get install nginx-light; scripts/test-deps.sh)")
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    listen = f"127.0.0.1:{port}"
    if tls:
        cert, key = self_signed(work)
        listen += f" ssl;\n        ssl_certificate {cert};\n        ssl_certificate_key {key}"
    conf = work / "nginx.conf"
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers that read the test's folders
    conf.write_text(
        f"""{user}daemon off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {work}/access.log;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen {listen};
        root {folder};
        location /private/ {{ return 403; }}
    }}
}}
""",
        encoding="utf-8",
    )
    log = work / "nginx.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [NGINX, "-c", str(conf), "-p", str(work)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(port, proc, "nginx", log)
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        stop_group(proc, signal.SIGTERM, 10.0)


@dataclass
class FaultProxy:
    """A TCP proxy on loopback in front of `upstream` (host, port); see the module docstring."""

    upstream: tuple[str, int]
    scheme: str = "http"
    plan: list[tuple[str, float]] = field(default_factory=list)
    rate: int = 0
    sent: int = 0
    connections: int = 0
    faults: int = 0
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                action = self.plan.pop(0) if self.plan else ("pass", 0)
                if action[0] != "pass":
                    self.faults += 1
            threading.Thread(target=self._serve, args=(client, action), daemon=True).start()

    def _serve(self, client: socket.socket, action: tuple[str, float]) -> None:
        kind, arg = action
        try:
            if kind == "503":
                client.recv(65536)
                client.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n" % int(arg)
                )
                return
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        done = threading.Event()
        threading.Thread(target=self._pipe_up, args=(client, upstream, done), daemon=True).start()
        try:
            if kind == "stall":
                done.wait(arg)
                return
            limit = int(arg) if kind == "cut" else None
            passed = 0
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    return
                if limit is not None and passed + len(chunk) >= limit:
                    chunk = chunk[: limit - passed]
                    client.sendall(chunk)
                    self._count(len(chunk))
                    return
                client.sendall(chunk)
                passed += len(chunk)
                self._count(len(chunk))
                if self.rate:
                    time.sleep(len(chunk) / self.rate)
        except OSError:
            return
        finally:
            done.set()
            for s in (client, upstream):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def _pipe_up(
        self, client: socket.socket, upstream: socket.socket, done: threading.Event
    ) -> None:
        try:
            while not done.is_set():
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
        except OSError:
            pass

    def _count(self, n: int) -> None:
        with self._lock:
            self.sent += n


@contextmanager
def fault_proxy(base_url: str) -> Iterator[FaultProxy]:
    scheme, address = base_url.split("://")
    host, port = address.split(":")
    proxy = FaultProxy((host, int(port)), scheme).start()
    try:
        yield proxy
    finally:
        proxy.close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """`folder/cert.pem`, a certificate for 127.0.0.1 signed by its own key, and that key in
    `folder/key.pem`."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextmanager
def s3_server(work: Path, auth_after: int | None = None) -> Iterator[dict[str, str]]:
    """moto's S3 server on a free loopback port; yields the environment that points at it.
    With `auth_after`, requests after the first `auth_after` need real IAM credentials (which
    the yielded ones are not)."""
    moto = Path(sys.executable).with_name("moto_server")
    if not moto.exists():
        unavailable("moto_server is not installed (pip install 'moto[server]': the dev extra)")
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = work / "moto.out"
    env = dict(os.environ)
    if auth_after is not None:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(auth_after)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    try:
        wait_for_port(port, proc, "moto_server", log)
        yield {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    finally:
        stop_group(proc, signal.SIGTERM, 10.0)


def s3_client(env: dict[str, str]) -> Any:
    """A botocore S3 client on the server `s3_server` yielded `env` for."""
    import botocore.session

    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


def build_manifest(root: Path, kind: str) -> Path:
    """The one shards build's manifest under `root` (under corpus/), or tokens build's."""
    (found,) = root.glob(f"{'corpus' if kind == 'shards' else kind}/**/_MANIFEST.json")
    return found
