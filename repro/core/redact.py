"""Redaction of secrets, user names and the hostname from anything the harness writes.

Bottom layer (standard library only): the fingerprint, the run, the batch
runner's logs, reports and bundles all use the same rules, so one secret is
scrubbed the same way wherever it appears.

Three kinds of secret are caught:
- values of environment variables whose *names* say they are secrets;
- credentials in URLs (``scheme://user:pass@host``, and ``user:pass@host`` starting a
  word), whatever the variable or argument that carried them;
- tokens recognisable by their shape (GitHub, Hugging Face, OpenAI, AWS, Slack,
  JWTs), wherever they occur: params, command lines, paths, logs, free text.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "<redacted>"

_HOME_RE = re.compile(r"/(home|Users)/[^/\s\"']+")
_SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL|AUTH", re.I)
# scheme://userinfo@ : the userinfo (a user, a password, or a token used as either) goes.
_URL_CREDS_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{1,20}://)[^\s/@'\"<>`]+@")
# user:password@host with no scheme (an scp or rsync target, an --out typed that way): the userinfo
# goes. It must start a word (so path parts and image names do not match), and an image digest
# (name:tag@sha256:<hex>) is not a host.
_BARE_CREDS_RE = re.compile(
    r"(?<![^\s=,;'\"(\[])[^\s/@:'\"<>`=,;]+:[^\s/@'\"<>`]+@(?![A-Za-z0-9]+:[0-9A-Fa-f]{32,})(?=[A-Za-z0-9\[])"
)
# Known token shapes, each with the literal text every match contains (any one of them): a text
# holding none is not searched, as an `in` test over a multi-megabyte Chrome trace costs far less
# than a regex pass. Each pattern is anchored so that ordinary words and hex digests do not match.
TOKEN_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    ("github-pat", ("github_pat_",), re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("huggingface", ("hf_",), re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("openai", ("sk-",), re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("aws-key-id", ("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("slack", ("xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"), re.compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}")),
    ("jwt", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")),
)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names say they are secrets (long enough to match safely)."""
    environ = os.environ if environ is None else environ
    return sorted({v for k, v in environ.items() if _SECRET_NAME_RE.search(k) and len(v) >= 6}, key=len, reverse=True)


def is_secret(name: str, value: str) -> bool:
    """Whether an environment variable must stay off disk: its name says it is a secret, or its value
    holds URL credentials or a token (the rules every redaction here applies)."""
    return bool(_SECRET_NAME_RE.search(name)) or scrub_tokens(value) != value


def scrub_tokens(text: str) -> str:
    """Credentials in URLs and token-shaped strings replaced by ``<redacted>`` (no environment needed)."""
    if "@" in text:  # both credential forms end in userinfo@
        if "://" in text:
            text = _URL_CREDS_RE.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
        if ":" in text:
            text = _BARE_CREDS_RE.sub(f"{REDACTED}@", text)
    for _, markers, pattern in TOKEN_PATTERNS:
        if any(marker in text for marker in markers):
            text = pattern.sub(REDACTED, text)
    return text


def text_redactor(
    hostname: str | None = None, home: str | None = None, secrets: list[str] | None = None
) -> Callable[[str], str]:
    """A function that redacts one string: secrets, URL credentials, tokens, home path, user folders, hostname."""
    hostname = hostname if hostname is not None else platform.node()
    home = home if home is not None else os.path.expanduser("~")
    secrets = secret_values() if secrets is None else secrets

    def fix(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        text = scrub_tokens(text)
        if home and len(home) > 1:
            text = text.replace(home, "~")
        if "/home/" in text or "/Users/" in text:
            text = _HOME_RE.sub(r"/\1/<user>", text)
        if hostname and len(hostname) >= 3:
            text = text.replace(hostname, "<hostname>")
        return text

    return fix


def redactor(
    hostname: str | None = None, home: str | None = None, secrets: list[str] | None = None
) -> Callable[[Any], Any]:
    """A function that redacts every string (keys included) of a JSON value.

    The fingerprint's allowlist keeps secrets out of ``env``; this second pass
    catches one that leaked into free text (an argv, a path, a param, collect_env
    output, a log line).
    """
    fix = text_redactor(hostname, home, secrets)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return fix(value)
        if isinstance(value, Mapping):
            return {fix(str(k)): walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        return value

    return walk


class LineRedactor:
    """Redacts a byte stream line by line (a child's output on its way into a log).

    A secret split across two reads would slip through a chunk-wise filter, so
    bytes are held until a newline (or until ``max_line`` bytes, so that a child
    printing without newlines cannot make us buffer without bound).
    """

    def __init__(self, fix: Callable[[str], str] | None = None, max_line: int = 1 << 16) -> None:
        self._fix = fix or text_redactor()
        self._buf = b""
        self._max = max_line

    def feed(self, data: bytes) -> bytes:
        """Redacted bytes for every complete line seen so far."""
        self._buf += data
        out: list[bytes] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0 and len(self._buf) < self._max:
                break
            cut = nl + 1 if nl >= 0 else self._max
            out.append(self._line(self._buf[:cut]))
            self._buf = self._buf[cut:]
        return b"".join(out)

    def flush(self) -> bytes:
        """Whatever is left (a last line without newline), redacted."""
        rest, self._buf = self._buf, b""
        return self._line(rest) if rest else b""

    def _line(self, raw: bytes) -> bytes:
        return self._fix(raw.decode(errors="replace")).encode()
