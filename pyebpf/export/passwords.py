"""bcrypt password hashes, checked and made with the system's ``libcrypt``
(libxcrypt: Debian's ``libcrypt1``, which knows ``$2a$``/``$2b$``/``$2y$``),
bound with cffi in ABI mode as :mod:`pyebpf.kernel.ffi` binds libc: no
compiler, no other package.

Only libcrypt's reentrant functions are used -- ``crypt_rn`` and
``crypt_gensalt_rn``, each call with its own buffer. ``crypt()`` is not:
it works in one static buffer shared by every caller, so two threads
checking passwords at once read each other's results (a wrong password
accepted, a right one refused). cffi releases the GIL during the call, so
checks in several threads run in parallel.

Passwords and hashes are C strings to libcrypt: one with a NUL byte would be
cut at it, so such a password never matches (and is never hashed).
"""
from __future__ import annotations

import threading

from ..errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_password", "hash_password", "dummy_hash", "hash_cost"]

#: libxcrypt's ``sizeof(struct crypt_data)``: ``crypt_rn``'s work area
_CRYPT_DATA_SIZE = 32768
#: ``CRYPT_GENSALT_OUTPUT_SIZE``
_SALT_SIZE = 192

_CDEF = """
char *crypt_rn(const char *phrase, const char *setting, void *data, int size);
char *crypt_gensalt_rn(const char *prefix, unsigned long count, const char *rbytes,
                       int nrbytes, char *output, int output_size);
"""

_bound: tuple[Any, Any] | None = None
_binding = threading.Lock()


def _libcrypt() -> tuple[Any, Any]:
    """(ffi, lib) of ``libcrypt.so.1``; OptionError when it is missing."""
    global _bound
    with _binding:
        if _bound is None:
            import cffi
            ffi = cffi.FFI()
            ffi.cdef(_CDEF)
            try:
                lib = ffi.dlopen("libcrypt.so.1")
            except OSError:
                raise OptionError("basic authentication needs the system's libcrypt.so.1 "
                                  "(libxcrypt: Debian's libcrypt1)") from None
            _bound = (ffi, lib)
        return _bound


def _crypt(password: bytes, setting: bytes) -> bytes | None:
    """libcrypt's hash of ``password`` with ``setting`` (a hash or a salt), in
    a buffer of this call's own; None when libcrypt refuses the setting."""
    ffi, lib = _libcrypt()
    data = ffi.new("char[]", _CRYPT_DATA_SIZE)
    got = lib.crypt_rn(password, setting, data, _CRYPT_DATA_SIZE)
    if got == ffi.NULL:
        return None
    out: bytes = ffi.string(got)
    return None if out.startswith(b"*") else out       # ("*0"/"*1": a failure)


def check_password(password: str, hashed: str) -> bool:
    """True if ``password`` matches the bcrypt hash ``hashed`` (safe to call
    from several threads at once; a password with a NUL byte never matches)."""
    import hmac
    if "\0" in password or "\0" in hashed:
        return False
    got = _crypt(password.encode(), hashed.encode())
    return got is not None and hmac.compare_digest(got, hashed.encode())


def _salt(cost: int) -> bytes:
    ffi, lib = _libcrypt()
    out = ffi.new("char[]", _SALT_SIZE)
    if lib.crypt_gensalt_rn(b"$2b$", cost, ffi.NULL, 0, out, _SALT_SIZE) == ffi.NULL:
        raise OptionError(f"libcrypt cannot make a bcrypt salt of cost {cost}")
    salt: bytes = ffi.string(out)
    return salt


def hash_password(password: str, cost: int = 10) -> str:
    """A bcrypt (``$2b$``) hash of ``password`` for ``basic_auth_users``."""
    if "\0" in password:
        raise OptionError("a password cannot contain a NUL byte")
    got = _crypt(password.encode(), _salt(cost))
    if got is None:
        raise OptionError(f"libcrypt cannot make a bcrypt hash of cost {cost}")
    return got.decode()


def hash_cost(hashed: str) -> int | None:
    """The cost of bcrypt hash ``hashed`` (``$2b$10$...`` -> 10), None when it
    does not say."""
    parts = hashed.split("$")
    if len(parts) < 4 or not parts[2].isdigit() or not parts[2].isascii():
        return None
    return int(parts[2])


def dummy_hash(cost: int) -> str:
    """A bcrypt setting of cost ``cost`` with a random salt and no password: a
    check against it takes as long as against a real hash of that cost, and
    matches no password. (The exporter checks unknown users' passwords
    against it, so that they are refused no sooner than known users'.)"""
    return _salt(cost).decode()
