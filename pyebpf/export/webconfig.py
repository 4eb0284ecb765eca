"""``--web.config.file``: TLS and basic authentication, configured as
Prometheus's own exporters configure them (the exporter-toolkit's file)::

    tls_server_config:
      cert_file: /etc/pyebpf/export.crt
      key_file: /etc/pyebpf/export.key
    basic_auth_users:
      prometheus: $2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay

Both sections are optional. Passwords are bcrypt hashes (``htpasswd -nBC 10
""`` prints one; so does :func:`hash_password`), checked with the system's
``libcrypt`` (:mod:`.passwords`), so the exporter needs no other package.

How :meth:`WebConfig.allows` checks a request's credentials:

- the ``Authorization`` header must be ``Basic BASE64`` (the scheme in any
  case), BASE64 the UTF-8 of ``user:password``; anything else -- another
  scheme, bytes that are not ASCII, bad base64, bad UTF-8, no colon, a NUL
  byte anywhere -- is refused, never an exception;
- an unknown user's password is checked against a dummy hash of the
  configured hashes' highest cost, so that an unknown user is refused no
  sooner than a known user with a wrong password (the user names cannot be
  learnt by timing);
- bcrypt checks run one at a time (a flood of wrong passwords costs one
  core, not all), in a buffer of their own (never libcrypt's shared one);
- a successful check is remembered (bcrypt is slow on purpose; Prometheus
  scrapes often), keyed on a SHA-256 of the user, the password and the
  stored hash together, and only after the check said yes; at most
  :data:`REMEMBERED` such, the oldest forgotten first. Failures are not
  remembered.

The file is the YAML subset that configuration needs -- top-level sections,
``key: value`` lines indented under them, ``#`` comments, quoted or bare
values; anything else (another key, a list, a nested mapping, a missing
file) is an :class:`~pyebpf.errors.OptionError` that names the line.
The exporter-toolkit's other settings (client certificates, cipher suites,
HTTP headers) are refused by name rather than ignored.
"""
from __future__ import annotations

import threading

from ..errors import OptionError
from .passwords import check_password, dummy_hash, hash_cost, hash_password

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["WebConfig", "load", "parse", "hash_password", "check_password", "credentials",
           "REMEMBERED"]

#: the most verified credentials a :class:`WebConfig` remembers
REMEMBERED = 64
#: the cost of the dummy hash when no configured hash says its own
_DEFAULT_COST = 10

_SECTIONS = {"tls_server_config": ("cert_file", "key_file"), "basic_auth_users": None}


class WebConfig:
    """A parsed web configuration: ``cert_file``/``key_file`` (both or
    neither) and ``users`` (name -> bcrypt hash)."""

    def __init__(self, cert_file: str | None = None, key_file: str | None = None,
                 users: dict[str, str] | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.users = dict(users or {})
        #: SHA-256 digests of verified (user, password, hash), oldest first
        self._good: dict[bytes, None] = {}
        self._dummy: str | None = None
        self._lock = threading.Lock()
        self._checking = threading.Lock()       # (one bcrypt check at a time)

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
        the right password (always True when no user is configured); see
        the module docs for how. Never raises for what a client sent."""
        if not self.users:
            return True
        got = credentials(header)
        if got is None:
            return False
        user, password = got
        stored = self.users.get(user)
        hashed = stored if stored is not None else self._dummy_hash()
        import hashlib
        key = hashlib.sha256("\0".join((user, password, hashed)).encode()).digest()
        with self._lock:
            if stored is not None and key in self._good:
                return True
        with self._checking:
            right = check_password(password, hashed)
        if not right or stored is None:
            return False
        with self._lock:
            self._good[key] = None
            while len(self._good) > REMEMBERED:
                del self._good[next(iter(self._good))]
        return True

    def _dummy_hash(self) -> str:
        """The hash unknown users' passwords are checked against (made once)."""
        with self._lock:
            if self._dummy is None:
                costs = [c for c in map(hash_cost, self.users.values()) if c is not None]
                self._dummy = dummy_hash(max(costs, default=_DEFAULT_COST))
            return self._dummy


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of a basic-authentication ``Authorization`` header,
    None for anything else (see the module docs)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "basic" or not token.isascii():
        return None
    import base64
    try:
        raw = base64.b64decode(token, validate=True)
        text = raw.decode("utf-8")
    except ValueError:                      # (binascii.Error and UnicodeDecodeError too)
        return None
    if base64.b64encode(raw).decode() != token:     # only the canonical form: Pythons
        return None                                 # differ on surplus padding
    user, sep, password = text.partition(":")
    if not sep or "\0" in text:
        return None
    return user, password


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
