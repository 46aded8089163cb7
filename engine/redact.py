"""Secret redaction: the one function every stored or printed text goes through.

API keys come from the environment and must never be written to the database, a trace,
a log or the terminal (DESIGN "Secrets").  An endpoint may quote the key back ("Incorrect
API key provided: Bearer sk-...") and that text would otherwise travel into a failure
detail, a trace and the store.  :func:`redact` replaces

* the value of every key the process knows of: the variables named by an LLM setting's
  ``api_key_env`` (registered with :func:`register_secret_env` when a client is made),
  ``OPENAI_API_KEY`` and any environment variable whose name ends in ``API_KEY``,
  ``_TOKEN`` or ``_SECRET`` (values of 8 characters or more);
* anything shaped like a bearer token (``Bearer <token>``) or an ``sk-…`` key

with ``[redacted]``.  The replacement holds no quote or backslash, so redacting a JSON
text leaves it valid JSON.

Every encoding of a key is redacted, not only the raw text (issue 24, 7): its JSON-escaped
forms (a key holding ``"`` or ``\\`` is stored escaped inside JSON text; also escaped twice,
and with non-ASCII as ``\\uXXXX``), its Python ``repr`` (argparse quotes a bad value so), its
URL-encoded forms, and its base64 inside a basic-auth
``user:key`` whatever the user (the three alignments of the key in base64, less the edge
characters the user and the padding change).  A ``Basic <base64>`` credential that decodes
to ``user:password`` is redacted whole.  Cheap when there is nothing to redact (substring tests in C
before any regular expression), so the store can run it over every row it writes.

A model can write a key back in forms no text encoding makes (issue 35, 1): in any mix of
upper and lower case, reversed, ROT13, as hex (of the key or its reverse), spaced out or
split by invisible characters (zero-width spaces, soft hyphens, joiners), or as HTML
character references (``&#115;``, ``&#x6b;``, ``&amp;``).  For each key these *folded* forms
are kept lower-case with every separator removed; a text is folded the same way (separators
out, entities decoded, lower-cased) and only when a folded form is in it does a pattern
that allows separators, entities and any case between the key's characters run, replacing
each such span.  The LLM client applies :func:`redact` to every reply the moment it arrives
(``personas.llm.client.complete``), so no observation, screen, wire or store sees it; the
store applies the same function again to what it writes.
"""

from __future__ import annotations

import base64
import codecs
import html
import html.entities
import json
import os
import re
import time
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "redact", "redact_obj", "register_secret", "register_secret_env", "known_secrets",
           "folded_forms"]

REDACTED = "[redacted]"
MIN_SECRET = 8

_ENV_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET|_SECRET_KEY)$", re.I)
# "Bearer <token>" and OpenAI-style keys (sk-..., sk-proj-..., sk-ant-...).
_SHAPES = re.compile(r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{6,}|\bsk-[A-Za-z0-9_-]{6,}")
# "Basic <base64 of user:password>" (checked by decoding: only real credentials go)
_BASIC = re.compile(r"\b(?i:basic)( +)([A-Za-z0-9+/]{8,}={0,2})")

# What may stand between a key's characters in a "spaced" or "split" form: whitespace and the
# invisible format characters (soft hyphen, Mongolian vowel separator, zero-width space /
# non-joiner / joiner, direction marks, bidi embeddings, word joiner and invisible operators,
# the byte-order mark).
_SEP_CLASS = "\\s\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_SEP = re.compile(f"[{_SEP_CLASS}]+")
_ENTITY_NAMES: dict[str, list[str]] = {}  # a character -> its named HTML references ("&amp;", "&amp")
for _name, _char in html.entities.html5.items():
    if len(_char) == 1:
        _ENTITY_NAMES.setdefault(_char, []).append(_name)

_explicit: set[str] = set()
_env_names: set[str] = {"OPENAI_API_KEY"}


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (ignored when shorter than 8 characters)."""
    global _cache
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET:
        _explicit.add(value.strip())
        _cache = None


def register_secret_env(name: str | None) -> None:
    """Redact the value of environment variable ``name`` (read at every call: it may change)."""
    global _cache
    if isinstance(name, str) and name:
        _env_names.add(name)
        _cache = None


_cache: tuple[tuple, float, list[str], list[str]] | None = None
_secret_names: tuple[str, ...] = ()  # the environment variables that held a secret at the last scan


def _cache_key() -> tuple:
    """What the cached secrets depend on: the registered secrets, the environment's size and
    the values of the variables that held a secret at the last scan (a key replaced in place,
    as a notebook does with ``os.environ["OPENAI_API_KEY"] = …``, changes it at once)."""
    env = os.environ
    return (len(_explicit), len(_env_names), len(env), tuple(env.get(n) for n in _secret_names))


def known_secrets() -> list[str]:
    """Every secret value to redact now, longest first (so a key containing another goes whole).

    Recomputed when a secret is registered, when the environment gains or loses a variable,
    when a variable that held a secret changes, or after a second (the store calls this for
    every row it writes).
    """
    global _cache, _secret_names
    now = time.monotonic()
    if _cache is not None and _cache[0] == _cache_key() and now - _cache[1] < 1.0:
        return _cache[2]
    vals = set(_explicit)
    names = []
    for name, value in os.environ.items():
        if name in _env_names or _ENV_NAME.search(name):
            names.append(name)
            if len(value.strip()) >= MIN_SECRET:
                vals.add(value.strip())
    _secret_names = tuple(names)
    out = sorted({v for secret in vals for v in encodings(secret)}, key=len, reverse=True)
    folded = sorted({v for secret in vals for v in folded_forms(secret)}, key=len, reverse=True)
    _cache = (_cache_key(), now, out, folded)
    return out


def _fold(text: str, *, json_text: bool = True) -> str:
    """``text`` as the folded forms are kept: JSON escapes decoded (a reply is JSON text, which
    may write any character as ``\\uXXXX``; not for a key itself), separators out, lower-case."""
    if json_text and "\\" in text:
        text = _JSON_ESCAPE.sub(_unescape, text)
    flat = "".join(text.lower().split())  # whitespace: split() in C is ~5 x faster than a pattern
    return flat if flat.isascii() else _SEP.sub("", flat)


_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([\"\\/])|[nrtfb])")


def _unescape(m: re.Match) -> str:
    if m.group(1):
        return chr(int(m.group(1), 16))
    return m.group(2) or " "


_sep_pattern: str | None = None


def _separators() -> str:
    """What may stand between two characters of a spaced or split key: a separator, or one
    written as a JSON escape (``\\u200b``, ``\\n``)."""
    global _sep_pattern
    if _sep_pattern is None:
        escaped = "|".join(f"{c:04x}" for c in [*range(0x3001), 0xfeff] if _SEP.fullmatch(chr(c)))
        _sep_pattern = f"(?:[{_SEP_CLASS}]|\\\\[nrtfb]|\\\\u(?:{escaped}))*"
    return _sep_pattern


def folded_forms(secret: str) -> set[str]:
    """The forms a writer (a model) can turn ``secret`` into beyond the encodings: the key and
    its reverse, each as it is, in ROT13 and as hex (of its UTF-8 bytes) — folded (lower-case,
    separators removed); forms shorter than 8 characters are left out."""
    out = set()
    for s in (secret, secret[::-1]):
        for t in (s, codecs.encode(s, "rot13")):
            out.add(_fold(t, json_text=False))
            out.add(t.encode("utf-8").hex())
    return {v for v in out if len(v) >= MIN_SECRET}


_patterns: dict[str, re.Pattern] = {}


def _char_pattern(c: str) -> str:
    """One character of a folded form: itself in any case, as a JSON escape, or as an HTML
    reference to it."""
    alts = {c, c.upper()} if c.upper() != c else {c}
    forms = [re.escape(a) for a in sorted(alts)]
    if c in '"\\/':
        forms.append(re.escape("\\" + c))
    for a in sorted(alts):
        forms.append(f"\\\\u{ord(a):04x}")
        forms.append(f"&#0*{ord(a)};?")
        forms.append(f"&#[xX]0*{ord(a):x};?")
        forms.extend(re.escape(f"&{n}") for n in _ENTITY_NAMES.get(a, ()))
    return "(?:" + "|".join(forms) + ")"


def _pattern(form: str) -> re.Pattern:
    """A pattern for a folded form written in any case, spaced or split by invisible
    characters, with any of its characters as an HTML reference."""
    pat = _patterns.get(form)
    if pat is None:
        if len(_patterns) > 256:
            _patterns.clear()
        pat = _patterns[form] = re.compile(_separators().join(_char_pattern(c) for c in form), re.I)
    return pat


def encodings(secret: str) -> set[str]:
    """``secret`` and the forms it takes inside stored or printed text: JSON-escaped (once and
    twice, ASCII-only or not), URL-encoded, and base64 within ``user:secret`` (each of the
    three alignments, without the edge characters that depend on the user or the padding).
    Forms shorter than 8 characters are left out (they would redact ordinary text)."""
    out = {secret}
    for ascii_only in (False, True):
        once = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        out.add(once)
        out.add(json.dumps(once, ensure_ascii=ascii_only)[1:-1])
    out.update({quote(secret, safe=""), quote(secret), quote_plus(secret),
                repr(secret)[1:-1], ascii(secret)[1:-1]})  # repr: argparse's "invalid value: '...'"
    raw = secret.encode("utf-8")
    for shift in range(3):  # where the key starts in "user:key", modulo 3 bytes
        enc = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = 4 if shift else 0  # the first group mixes the user's bytes in
        end = len(enc) - (4 if (shift + len(raw)) % 3 else 0)  # the last group may hold padding or what follows
        if end - start >= MIN_SECRET:
            out.add(enc[start:end])
    return {v for v in out if len(v) >= MIN_SECRET}


def _basic(m: re.Match) -> str:
    token = m.group(2)
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (ValueError, TypeError):
        return m.group(0)
    return f"{m.group(0)[:5]}{m.group(1)}{REDACTED}" if b":" in decoded else m.group(0)


def redact(text: str) -> str:
    """``text`` with every known secret and every token-shaped string replaced by ``[redacted]``."""
    if not isinstance(text, str) or not text:
        return text
    if ("asic " in text or "ASIC " in text) and _BASIC.search(text):  # "Basic <credential>" goes whole first
        text = _BASIC.sub(_basic, text)
    for secret in _cache[2] if _fresh() else known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    folded = _cache[3]  # fresh: known_secrets() just ran
    if folded:
        flat = _fold(html.unescape(text) if "&" in text else text)
        for form in folded:
            if form in flat:
                text = _pattern(form).sub(REDACTED, text)
    if "sk-" in text or "earer" in text or "EARER" in text:  # sk-…, Bearer / bearer / BEARER
        text = _SHAPES.sub(REDACTED, text)
    return text


#: Every byte of the markers :func:`redact` looks for before its token shapes ("sk-", "Bearer",
#: "BEARER", "Basic ", "BASIC "), and every other byte (what :func:`_has_marker` sieves out)
_MARKER_BYTES = frozenset(b"sk-earEARicIC S")
_NOT_MARKER = bytes(b for b in range(256) if b not in _MARKER_BYTES)


def _markers_in(data: bytes) -> bool:
    return (b"sk-" in data or b"earer" in data or b"EARER" in data
            or b"asic " in data or b"ASIC " in data)


def _has_marker(data: bytes) -> bool:
    """Whether a token shape's marker occurs in ``data``.  A long text (a game's packed events)
    is first searched with every byte no marker holds deleted (events keep about a fifth): a
    marker in ``data`` is one there too, its bytes still adjacent, so only when one shows there
    is ``data`` itself searched.  One deletion pass and five searches of a fifth take about
    35 % less time than five searches of the whole; on English prose (a task's labels) the
    sieve shows false markers ("clearer": "...earer"), hence only above 16 KB."""
    if len(data) >= 16384 and not _markers_in(data.translate(None, _NOT_MARKER)):
        return False
    return _markers_in(data)


def redact_utf8(data: bytes) -> bytes:
    """:func:`redact` of UTF-8 ``data`` (a JSON document the store writes), without decoding
    it when nothing in it can be redacted: no secret is known and none of the token shapes'
    markers occurs (then :func:`redact` returns its text unchanged)."""
    secrets = _cache[2] if _fresh() else known_secrets()
    if not secrets and not _cache[3] and not _has_marker(data):
        return data
    text = data.decode()
    clean = redact(text)
    return data if clean is text or clean == text else clean.encode()


def _fresh() -> bool:
    c = _cache
    return c is not None and c[0] == _cache_key() and time.monotonic() - c[1] < 1.0


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with :func:`redact` applied to every string (keys too)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj
