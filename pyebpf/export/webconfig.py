"""``--web.config.file``: TLS and basic authentication, configured as
Prometheus's own exporters configure them (the exporter-toolkit's file)::

    tls_server_config:
      cert_file: /etc/pyebpf/export.crt
      key_file: /etc/pyebpf/export.key
    basic_auth_users:
      prometheus: $2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay

Both sections are optional. Passwords are bcrypt hashes (``htpasswd -nBC 10
""`` prints one; so does :func:`hash_password`), checked with the system's
``libcrypt`` (libxcrypt, which knows ``$2b$``/``$2y$``), so the exporter
needs no other package. A successful check is remembered for the process's
life (bcrypt is slow on purpose; Prometheus scrapes often).

The file is the YAML subset that configuration needs -- top-level sections,
``key: value`` lines indented under them, ``#`` comments, quoted or bare
values; anything else (another key, a list, a nested mapping, a missing
file) is an :class:`~pyebpf.errors.OptionError` that names the line.
The exporter-toolkit's other settings (client certificates, cipher suites,
HTTP headers) are refused by name rather than ignored.
"""
from __future__ import annotations

from ..errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["WebConfig", "load", "parse", "hash_password", "check_password"]

_SECTIONS = {"tls_server_config": ("cert_file", "key_file"), "basic_auth_users": None}


class WebConfig:
    """A parsed web configuration: ``cert_file``/``key_file`` (both or
    neither) and ``users`` (name -> bcrypt hash)."""

    def __init__(self, cert_file: str | None = None, key_file: str | None = None,
                 users: dict[str, str] | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.users = dict(users or {})
        self._good: set[tuple[str, bytes]] = set()

    @property
    def tls(self) -> bool:
        """Serve HTTPS."""
        return self.cert_file is not None

    def ssl_context(self) -> Any:
        """The server's :class:`ssl.SSLContext` (TLS 1.2 at least)."""
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert_file or "", self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise OptionError(f"web config: cannot load the certificate {self.cert_file} "
                              f"and key {self.key_file}: {exc}") from None
        return ctx

    def allows(self, header: str | None) -> bool:
        """True if the ``Authorization`` header ``header`` names a user with
        the right password (always True when no user is configured)."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        import base64
        import binascii
        import hashlib
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True) \
                .decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        stored = self.users.get(user)
        if not sep or stored is None:
            return False
        token = (user, hashlib.sha256(password.encode()).digest())
        if token in self._good:
            return True
        if check_password(password, stored):
            self._good.add(token)
            return True
        return False


def load(path: str) -> WebConfig:
    """The web configuration in file ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OptionError(f"--web.config.file {path}: {reason}") from None
    return parse(text, path)


def _scalar(text: str, where: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    if text[:1] in ("[", "{", "&", "*", "|", ">", "-"):
        raise OptionError(f"{where}: expected a plain value, not {text!r}")
    return text


def parse(text: str, path: str = "web config") -> WebConfig:
    """A :class:`WebConfig` from the file's ``text`` (see the module docs)."""
    section: str | None = None
    found: dict[str, dict[str, str]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{n}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, rest = line.partition(":")
        if not sep:
            raise OptionError(f"{where}: expected 'name: value', not {line.strip()!r}")
        key = name.strip()
        if not line[0].isspace():
            if key not in _SECTIONS:
                raise OptionError(f"{where}: {key!r} is not supported (supported: "
                                  f"{', '.join(_SECTIONS)})")
            if _scalar(rest, where) not in ("", "{}", "null"):
                raise OptionError(f"{where}: {key} is a section: its settings go on the "
                                  f"indented lines under it")
            section = key
            found.setdefault(key, {})
            continue
        if section is None:
            raise OptionError(f"{where}: an indented line outside a section")
        allowed = _SECTIONS[section]
        if allowed is not None and key not in allowed:
            raise OptionError(f"{where}: {section}.{key} is not supported (supported: "
                              f"{', '.join(allowed)})")
        value = _scalar(rest, where)
        if not value:
            raise OptionError(f"{where}: {key} has no value")
        found[section][_scalar(key, where)] = value
    return _config(found, path)


def _config(found: dict[str, dict[str, str]], path: str) -> WebConfig:
    tls = found.get("tls_server_config", {})
    cert, key = tls.get("cert_file"), tls.get("key_file")
    if "tls_server_config" in found and (cert is None or key is None):
        raise OptionError(f"{path}: tls_server_config needs both cert_file and key_file")
    users = found.get("basic_auth_users", {})
    for user, hashed in users.items():
        if not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise OptionError(f"{path}: the password of {user!r} is not a bcrypt hash "
                              f"($2b$...; htpasswd -nBC 10 \"\" makes one)")
    return WebConfig(cert, key, users)


# ---------------------------------------------------------------- bcrypt
_LIB: Any = None


def _libcrypt() -> Any:
    global _LIB
    if _LIB is None:
        import ctypes
        try:
            lib = ctypes.CDLL("libcrypt.so.1")
        except OSError:
            raise OptionError("basic authentication needs the system's libcrypt.so.1 "
                              "(libxcrypt: Debian's libcrypt1)") from None
        lib.crypt.restype = ctypes.c_char_p
        lib.crypt.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        lib.crypt_gensalt.restype = ctypes.c_char_p
        lib.crypt_gensalt.argtypes = (ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p,
                                      ctypes.c_int)
        _LIB = lib
    return _LIB


def check_password(password: str, hashed: str) -> bool:
    """True if ``password`` matches the bcrypt hash ``hashed``."""
    import hmac
    got = _libcrypt().crypt(password.encode(), hashed.encode())
    return got is not None and hmac.compare_digest(got, hashed.encode())


def hash_password(password: str, cost: int = 10) -> str:
    """A bcrypt (``$2b$``) hash of ``password`` for ``basic_auth_users``."""
    lib = _libcrypt()
    salt = lib.crypt_gensalt(b"$2b$", cost, None, 0)
    if salt is None:
        raise OptionError(f"libcrypt cannot make a bcrypt salt of cost {cost}")
    return str(lib.crypt(password.encode(), salt).decode())
