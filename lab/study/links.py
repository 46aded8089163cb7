"""Private links to a study's whole session, one per participant (``calbench serve --study``).

A link's code is derived from the study's name and the participant's id with a secret kept
next to the database (``DB.links-key``), so the links stay the same every time the study is
served and nobody can work one out without the key.  Refusals are one-line
:class:`lab.gamespec.SetupError`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import string
from pathlib import Path
from typing import Any

from ..gamespec import SetupError

__all__ = ["participant_ids", "link_key", "study_link", "study_links"]


def participant_ids(raw: str | None) -> list[str]:
    """``--participants``: ids (``P01,P02``) or a count (``12`` → ``P001..P012``)."""
    if not raw or not raw.strip():
        raise SetupError("--study needs --participants: ids (P01,P02) or a count (12)")
    text = raw.strip()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= 1000:
            raise SetupError(f"--participants {n}: serve 1 to 1000 participants at a time")
        return [f"P{i:03d}" for i in range(1, n + 1)]
    ids = [p.strip() for p in text.split(",")]
    from engine.inputs import MAX_ID_CHARS, printable

    bad = [p for p in ids if not p or not p.replace("-", "").replace("_", "").isalnum() or p.startswith("sim-")
           or len(p) > MAX_ID_CHARS]
    if bad:
        raise SetupError(f"--participants: {printable(bad[0], 48)!r} is not an id; use letters, digits, '-' or '_', "
                         f"at most {MAX_ID_CHARS} (ids starting 'sim-' are for simulated participants)")
    if len(set(ids)) != len(ids):
        raise SetupError("--participants names an id twice")
    return ids


def _refuse_lookalikes(study: Any, ids: list[str], db: str) -> None:
    """A browser link has no terminal to ask at, so a served id that looks like another served id or
    an existing participant's (P0O1 next to P001) is refused here, before any link is made."""
    from .admit import ParticipantError, existing_participants, lookalikes

    try:
        known = existing_participants(study, db)
    except ParticipantError as exc:
        raise SetupError(str(exc)) from None
    for n, pid in enumerate(ids):
        if pid in known:  # registered already (a look-alike was confirmed then)
            continue
        for others, whose in ((known, "the existing participant"), (ids[:n], "the served participant")):
            like = lookalikes(pid, others)
            if like:
                raise SetupError(f"--participants: {pid} looks like {whose} {like[0]}; a browser link cannot ask, "
                                 f"so serve ids that differ by more than that (or register {pid} first at a "
                                 f"terminal: calbench study run ... --participant {pid} --new-participant)")


def link_key(db: str) -> bytes:
    """The secret the study links are derived from, kept next to the database (``DB.links-key``,
    readable by its owner only); made on first use."""
    path = Path(db + ".links-key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SetupError(f"cannot create the study links' key {path}: {exc.strerror or exc}") from None
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(os.urandom(32).hex() + "\n")
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        raise SetupError(f"the study links' key {path} is unreadable; remove it to make a new one "
                         "(every participant's link then changes)") from None
    if len(key) < 16:
        raise SetupError(f"the study links' key {path} is too short; remove it to make a new one")
    return key


def study_link(key: bytes, study: str, participant: str) -> str:
    """A participant's link code: derived from the study and the participant with a secret key
    (HMAC-SHA256), so it is the same every time the study is served, 17 URL-safe characters
    (about 101 bits), never starting with '-'."""
    digest = hmac.new(key, f"calbench-study-link\0{study}\0{participant}".encode(), hashlib.sha256).digest()
    first = (string.ascii_letters + string.digits)[digest[0] % 62]
    return first + base64.urlsafe_b64encode(digest[1:13]).decode()


def study_links(study: Any, participants: str | None, db: str) -> dict[str, str]:
    """``{link code: participant}`` for ``--participants`` of ``study`` (a ``lab.study.model.Study``);
    every id must match the study's ``participant_pattern`` (each link runs ``study run``,
    which would refuse it)."""
    ids = participant_ids(participants)
    pattern = study.study.participant_pattern
    off = [p for p in ids if not re.fullmatch(pattern, p)]
    if off:
        raise SetupError(f"--participants: {off[0]!r} does not match the study's participant_pattern {pattern!r}")
    _refuse_lookalikes(study, ids, db)
    key = link_key(db)
    return {study_link(key, study.name, pid): pid for pid in ids}  # the same links after a restart
