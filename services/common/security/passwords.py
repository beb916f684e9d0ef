"""Password hashing and the naming rules Milvus applies to users, roles and passwords.

Passwords are hashed with bcrypt (salted, cost 10 as Milvus). bcrypt reads at most 72 bytes,
and Milvus allows passwords of up to 256 characters, so the password is first reduced to a
fixed-size SHA-256 digest (base64, 44 bytes): every character counts, none is truncated.
A hash restored from a Milvus RBAC backup (RestoreRBAC) is Go's bcrypt of the password itself,
which Go marks ``$2a$`` (Python's bcrypt, which made every Vectide hash, marks ``$2b$``): such
a hash is checked against the password as Milvus checks it.
"""

from __future__ import annotations

import base64
import hashlib
import re

import bcrypt

from vectide.services.common import errors

#: bcrypt's work factor (Milvus uses Go's bcrypt.DefaultCost, 10: ~70 ms a hash here)
DEFAULT_ROUNDS = 10
#: how Go's bcrypt (Milvus's) marks its hashes
GO_BCRYPT = "$2a$"
MIN_PASSWORD_LENGTH = 6
MAX_PASSWORD_LENGTH = 256
MAX_NAME_LENGTH = 32
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _digest(password: str) -> bytes:
    return base64.b64encode(hashlib.sha256(password.encode()).digest())


def hash_password(password: str, rounds: int = DEFAULT_ROUNDS) -> str:
    """A salted bcrypt hash of ``password``, as text for the metastore."""
    return bcrypt.hashpw(_digest(password), bcrypt.gensalt(rounds)).decode()


def verify_password(password: str, hashed: str) -> bool:
    """Whether ``password`` is the one ``hashed`` was made from (constant time)."""
    secret = password.encode() if hashed.startswith(GO_BCRYPT) else _digest(password)
    try:
        return bcrypt.checkpw(secret, hashed.encode())
    except ValueError:  # a corrupt stored hash (or over 72 bytes for Go's) verifies nothing
        return False


def check_username(name: str) -> None:
    """Milvus's rule: a letter, then letters, digits or underscores; at most 32 characters."""
    _check_name("username", name, _NAME, "a letter, then letters, digits or underscores")


def check_role_name(name: str) -> None:
    """Milvus's rule: a letter or underscore, then letters, digits, underscores or dashes."""
    _check_name(
        "role name", name, _ROLE_NAME, "a letter or underscore, then letters, digits, "
        "underscores or dashes"
    )  # fmt: skip


def _check_name(kind: str, name: str, pattern: re.Pattern[str], rule: str) -> None:
    if not name:
        raise errors.invalid(f"{kind} should not be empty")
    if len(name) > MAX_NAME_LENGTH or not pattern.fullmatch(name):
        raise errors.invalid(
            f"invalid {kind} {name!r}: {rule}, at most {MAX_NAME_LENGTH} characters"
        )


def check_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise errors.invalid(
            f"invalid password length: it must be {MIN_PASSWORD_LENGTH} to "
            f"{MAX_PASSWORD_LENGTH} characters"
        )
