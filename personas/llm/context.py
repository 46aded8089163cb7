"""The context budget of an LLM seat: token estimates, the round digest, learning the window.

A seat's *transcript* (``LLMPersona.messages``) is append-only: the system prompt, then
every user message and reply of the game.  What is *sent* is a view of it that always
fits the model's context window:

    system prompt [+ a digest of rounds < ``upto``]  +  every message of rounds ≥ ``upto``

``upto`` only moves forward and only at round boundaries, so between two trims each
request extends the previous one and a provider's prefix cache keeps working.  The digest
says, per earlier round, what the seat did and heard: the meeting and its participants,
how many messages went each way, the last word each way, and the batch it committed.  Its
calendar is re-rendered in every round's first message anyway, so nothing of the state
is lost; only the word-for-word talk of old rounds is.

Token counts are *estimates* (no tokenizer is loaded): characters / 3.5 plus 4 per
message, scaled by what the endpoint's ``usage.prompt_tokens`` says about earlier
requests (:class:`Estimator`).  A window comes from the settings (``context_window``),
from ``/v1/models`` metadata (vLLM's ``max_model_len`` and similar keys) or from the text
of a context-length 400 (:func:`window_from_error`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable, Sequence

from engine.actions import EnvelopeError, Message, Reschedule, Schedule, parse_envelope

from .prompts import HEADER_RE

__all__ = ["Estimator", "DEFAULT_MARGIN", "message_rounds", "round_digest", "digest_block", "window_from_error", "window_from_models",
           "fits", "CHARS_PER_TOKEN", "MESSAGE_OVERHEAD"]

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD = 4

_INBOX_RE = re.compile(r"^\[\d+\] From Agent (\d+) \([^,]+, Meeting M-?\d+\): (.*)$", re.M)
_PARTS_RE = re.compile(r"Meeting M(-?\d+)(?:, | \()participants \[([\d, ]*)\]")
_NOT_PART_RE = re.compile(r"You are not a participant of Meeting M(-?\d+)")


class Estimator:
    """Estimated prompt tokens, calibrated by the endpoint's ``usage.prompt_tokens``.

    ``ratio`` starts at 1 and becomes the largest recent ratio actual / estimated (never
    below 0.5): a tokenizer that needs more tokens than the estimate makes later
    estimates grow to match.  One estimator serves every seat of a run on the same
    endpoint and model (``RunPool.estimators``): the calibration is the model's.

    ``margin`` is the estimate's own relative error: :data:`DEFAULT_MARGIN` until the
    endpoint has reported ``usage`` twice, then the spread of the ratios it reported
    (at least :data:`MIN_MARGIN`).  A request that fits within the margin is sent: the
    server's 400 decides, not the estimate.
    """

    def __init__(self, ratio: float = 1.0) -> None:
        self.ratio = ratio
        self.seen: list[float] = []  # recent actual / raw ratios (at most 32)

    @staticmethod
    def raw(messages: Iterable[dict[str, Any]]) -> float:
        total = 0.0
        for m in messages:
            c = m.get("content")
            n = len(c) if isinstance(c, str) else len(json.dumps(c))
            total += n / CHARS_PER_TOKEN + MESSAGE_OVERHEAD
        return total

    def tokens(self, messages: Iterable[dict[str, Any]]) -> int:
        return math.ceil(self.raw(messages) * self.ratio)

    @property
    def margin(self) -> float:
        if len(self.seen) < 2:
            return DEFAULT_MARGIN
        hi, lo = max(self.seen), min(self.seen)
        return max(MIN_MARGIN, min(DEFAULT_MARGIN, (hi - lo) / hi + MIN_MARGIN))

    def low(self, tokens: int) -> int:
        """The fewest tokens a request estimated at ``tokens`` may really need."""
        return math.floor(tokens * (1 - self.margin))

    def observe(self, messages: Sequence[dict[str, Any]], prompt_tokens: Any) -> None:
        """Learn from a request whose ``usage.prompt_tokens`` the endpoint reported."""
        if not isinstance(prompt_tokens, (int, float)) or isinstance(prompt_tokens, bool) or prompt_tokens <= 0:
            return
        raw = self.raw(messages)
        if raw <= 0:
            return
        seen = prompt_tokens / raw
        self.seen = (self.seen + [seen])[-32:]
        # Follow the tokenizer up at once, down slowly (a margin is cheaper than an overflow).
        self.ratio = round(max(0.5, seen if seen > self.ratio else 0.8 * self.ratio + 0.2 * seen), 4)


#: The estimate's relative error before the endpoint has reported ``usage``: characters /
#: 3.5 ran 9-17 % above llama.cpp's count for SmolLM2 on these prompts.
DEFAULT_MARGIN = 0.2
MIN_MARGIN = 0.03


def fits(prompt_tokens: int, window: int, max_tokens: int | None) -> bool:
    """Whether a prompt of this size plus the reply budget fits, with a 4% + 16 token margin."""
    reply = max_tokens or 0
    return prompt_tokens + reply + math.ceil(window * 0.04) + 16 <= window


# --------------------------------------------------------------------------------------
# Rounds of a transcript
# --------------------------------------------------------------------------------------
def message_rounds(messages: Sequence[dict[str, Any]]) -> list[int]:
    """The round (0-based) each message belongs to: a user message by its header line,
    a reply by the message it answers; the system prompt is round -1."""
    out: list[int] = []
    current = -1
    for m in messages:
        if m.get("role") == "user":
            h = HEADER_RE.search(m.get("content") or "")
            if h:
                current = int(h.group("round")) - 1
        out.append(current if m.get("role") != "system" else -1)
    return out


def _short(text: str, n: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def round_digest(round_: int, messages: Sequence[dict[str, Any]]) -> str:
    """One compact paragraph about one earlier round, from the seat's own transcript of it."""
    meeting = participants = None
    participant = True
    received: list[tuple[int, str]] = []
    sent: list[Message] = []
    batches: dict[str, tuple[Any, ...]] = {}
    phase = None
    for m in messages:
        c = m.get("content") or ""
        if m.get("role") == "user":
            h = HEADER_RE.search(c)
            if h:
                phase = h.group("phase")
                meeting = meeting if meeting is not None else int(h.group("meeting"))
            pm = _PARTS_RE.search(c)
            if pm and participants is None:
                participants = pm.group(2)
            if _NOT_PART_RE.search(c):
                participant = False
            received.extend((int(s), t) for s, t in _INBOX_RE.findall(c))
        elif m.get("role") == "assistant":
            try:
                env = parse_envelope(c)
            except EnvelopeError:
                continue
            if phase == "CHEAP_TALK":
                sent.extend(a for a in env.actions if isinstance(a, Message))
                sent.extend(Message("participant_groupchat", f"I agree to slot {s}.") for s in env.agreed)
            elif phase in ("DECISION", "VOLUNTARY"):
                batches[phase] = env.actions  # the last attempt is the one that counts
    who = "you took part" if participant else "you were not a participant but were contacted"
    head = f"Round {round_ + 1}, Meeting M{meeting}" + (f" (participants [{participants}])" if participants else "")
    parts = [f"{head}: {who}. You sent {len(sent)} message(s) and received {len(received)}."]
    if received:
        s, t = received[-1]
        parts.append(f'Last message to you, from Agent {s}: "{_short(t)}"')
    if sent:
        parts.append(f'Your last message: "{_short(sent[-1].content)}"')
    for phase_name in ("VOLUNTARY", "DECISION"):
        acts = batches.get(phase_name)
        if acts is None:
            continue
        moves = [f"item {a.item_id} from slot {a.from_slot} to {a.to_slot}" for a in acts if isinstance(a, Reschedule)]
        sched = [a.slot for a in acts if isinstance(a, Schedule)]
        what = []
        if moves:
            what.append("moved " + "; ".join(moves))
        if sched:
            what.append(f"scheduled the meeting at slot {sched[-1]}")
        parts.append(f"Your {phase_name} batch: " + (", then ".join(what) if what else "nothing") + ".")
    return " ".join(parts)


def digest_block(messages: Sequence[dict[str, Any]], rounds: Sequence[int], upto: int, keep: int | None = None) -> str:
    """The digest of rounds ``< upto`` to append to the system prompt ('' when there is none).

    ``keep``: only the last ``keep`` rounds' paragraphs (when even the digest must shrink).
    """
    if upto <= 0:
        return ""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for m, r in zip(messages, rounds):
        if 0 <= r < upto:
            by_round.setdefault(r, []).append(m)
    items = sorted(by_round.items())
    if keep is not None:
        items = items[-keep:] if keep > 0 else []
    if not items:
        return ""
    lines = [round_digest(r, ms) for r, ms in items]
    return ("\n\n## Earlier rounds (summary)\nThe word-for-word talk of these rounds is no longer shown; "
            "your calendar in each round's first message is up to date.\n" + "\n".join(f"- {x}" for x in lines))


# --------------------------------------------------------------------------------------
# Learning the window
# --------------------------------------------------------------------------------------
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"context (?:size|window|length)(?: of| is)? \(?(\d{3,7})(?: tokens)?\)?", re.I),  # llama.cpp, others
    re.compile(r"\bn_ctx\W{1,4}(\d{3,7})", re.I),
    re.compile(r"context[_ ]window(?:_size)?\W{1,4}(\d{3,7})", re.I),
)
_MODEL_KEYS = ("max_model_len", "context_window", "context_length", "max_context_length", "n_ctx")


def window_from_error(message: str | None, body: Any = None) -> int | None:
    """The context window a context-length error states (its JSON body or its text), or None."""
    if isinstance(body, dict):
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        for k in ("n_ctx", "context_window", "max_context_length"):
            v = err.get(k) if isinstance(err, dict) else None
            if isinstance(v, int) and v > 0:
                return v
    for rx in _WINDOW_PATTERNS:
        m = rx.search(message or "")
        if m:
            return int(m.group(1))
    return None


def window_from_models(models: Any, model: str) -> int | None:
    """The context window ``/v1/models`` metadata gives for ``model`` (or the only model listed)."""
    data = models.get("data") if isinstance(models, dict) else models
    if not isinstance(data, list):
        return None
    entries = [d for d in data if isinstance(d, dict)]

    def window(d: dict) -> int | None:
        for src in (d, d.get("meta") if isinstance(d.get("meta"), dict) else {}):
            for k in _MODEL_KEYS:
                v = src.get(k)
                if isinstance(v, int) and v > 0:
                    return v
        return None

    named = [d for d in entries if d.get("id") == model]
    if named:
        return window(named[0])
    # Not listed under this name (llama.cpp answers to any name): a window every listed model shares.
    windows = {window(d) for d in entries}
    return windows.pop() if len(windows) == 1 else None
