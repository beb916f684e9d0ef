"""TLS for Vectide's servers and its own clients, from the ``security`` config section.

The proxy's client ports (gRPC and REST) follow ``security.tls_mode`` as Milvus's
``common.security.tlsMode``: 0 off, 1 one-way, 2 mutual. The internal RPC ports between roles
follow ``security.internal_tls`` (always mutual, with the same certificate, key and CA).
Vectide's own clients (the readiness probe, ``vectide status``, internal RPCs) trust
``tls_ca_file`` and, where the server wants one, present ``tls_cert_file``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from vectide.services.common.config import ConfigError, SecurityConfig

OFF, ONE_WAY, MUTUAL = 0, 1, 2


@dataclass(frozen=True)
class TlsFiles:
    """The PEM bytes one process serves and dials with, read once at start (and the paths,
    which Python's ``ssl`` loads a certificate chain from)."""

    cert_file: str
    key_file: str
    cert: bytes
    key: bytes
    ca: bytes | None
    server_name: str


def check(cfg: SecurityConfig) -> None:
    """Refuse a TLS setting that cannot work, naming the key, before anything listens."""
    if cfg.tls_mode not in (OFF, ONE_WAY, MUTUAL):
        raise ConfigError(f"security.tls_mode must be 0, 1 or 2, got {cfg.tls_mode}")
    if cfg.tls_mode == OFF and not cfg.internal_tls:
        return
    for key in ("tls_cert_file", "tls_key_file"):
        if not getattr(cfg, key):
            raise ConfigError(f"security.{key} is required when TLS is on")
    if (cfg.tls_mode == MUTUAL or cfg.internal_tls) and not cfg.tls_ca_file:
        raise ConfigError("security.tls_ca_file is required for mutual TLS")
    if cfg.internal_tls and cfg.tls_mode == OFF:
        # the proxy serves its internal service on the Milvus port, which would stay plain
        raise ConfigError("security.internal_tls needs security.tls_mode 1 or 2")


def load(cfg: SecurityConfig) -> TlsFiles | None:
    """The certificate files when any TLS is on, else None."""
    check(cfg)
    if cfg.tls_mode == OFF and not cfg.internal_tls:
        return None
    try:
        return TlsFiles(
            cert_file=cfg.tls_cert_file,
            key_file=cfg.tls_key_file,
            cert=Path(cfg.tls_cert_file).read_bytes(),
            key=Path(cfg.tls_key_file).read_bytes(),
            ca=Path(cfg.tls_ca_file).read_bytes() if cfg.tls_ca_file else None,
            server_name=cfg.tls_server_name,
        )
    except OSError as exc:
        raise ConfigError(f"cannot read a TLS file of the security section: {exc}") from exc


def server_credentials(files: TlsFiles, mutual: bool) -> grpc.ServerCredentials:
    """gRPC server credentials; ``mutual`` requires a client certificate signed by the CA."""
    return grpc.ssl_server_credentials(
        [(files.key, files.cert)],
        root_certificates=files.ca if mutual else None,
        require_client_auth=mutual,
    )


def add_port(
    server: grpc.Server, address: str, files: TlsFiles | None, mutual: bool = False
) -> int:
    """Listen on ``address``, with TLS when ``files`` is set; 0 when the port is taken."""
    if files is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, server_credentials(files, mutual))


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Client credentials of Vectide's own calls: trust the CA (the system's roots when none
    is set) and present this process's certificate, which a mutual server asks for."""
    return grpc.ssl_channel_credentials(
        root_certificates=files.ca, private_key=files.key, certificate_chain=files.cert
    )


def name_options(files: TlsFiles) -> list[tuple[str, str]]:
    """Channel options that check the server's certificate for ``tls_server_name``."""
    return [("grpc.ssl_target_name_override", files.server_name)] if files.server_name else []


def client_files(cfg: SecurityConfig) -> TlsFiles | None:
    """What a client of the proxy's Milvus port needs, or None when that port is plain."""
    return load(cfg) if cfg.tls_mode != OFF else None


def internal_files(cfg: SecurityConfig) -> TlsFiles | None:
    """What the internal RPC servers and clients use, or None when they are plain."""
    return load(cfg) if cfg.internal_tls else None


def http_context(files: TlsFiles, mutual: bool) -> ssl.SSLContext:
    """The REST server's TLS context, with the same certificate and client check as gRPC."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert_file, files.key_file)
    if mutual:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=(files.ca or b"").decode())
    return context
