"""An LLM in a seat, over any OpenAI-compatible chat-completions endpoint.

One *transcript* per seat for the whole game, append-only: the system prompt, then for
every call the user message and the model's reply (``messages``).  What is *sent* is the
transcript fitted to the model's context window (``personas.llm.context``): the system
prompt, a digest of earlier rounds once they no longer fit, and the current round in
full.  Rounds are digested only at round boundaries and never un-digested, so between two
trims each request extends the previous one and a provider's prefix cache keeps working;
every trim is recorded in the call's ``extra["context"]`` (and so in the trace).  The
window is configured (``context_window``), read from ``/v1/models`` or learned from a
context-length 400 (then the call is fitted again and resent once).  Reflection calls
(paper F.3) are sent with the thread as context but their question and answer are not
appended — they never enter the game's context.

Structured outputs (``personas.llm.schema``): each call carries the JSON schema of the
envelope for its phase, in the form ``structured`` says; ``auto`` walks json_schema →
json_object + schema → plain json_object → none as the endpoint refuses them, and keeps
the first it accepts (``extra["structured"]``).  Replies are read with
:func:`engine.actions.parse_envelope` (lenient) whatever the form.  Failures:

* unreadable output → ``Reply(error="parse_error", text=raw)``: an *agent* failure; the
  engine records it and treats the turn as a pass (CHEAP_TALK) or a rejected batch
  (DECISION); the next prompt says why the reply could not be read;
* endpoint trouble that outlives the retries (``personas.llm.client``: unreachable, rate
  limited, server errors) → ``Reply(error="infra_error")``: an *infrastructure* failure;
  the engine records ``seat_timeout`` (with ``failure`` naming the kind) and the game goes
  on.  So is a configuration error met during a call (``LLMConfigError``: no API key);
* a thread that does not fit even with every earlier round digested →
  ``Reply(error="context_overflow")``: a *configuration* failure (a longer-context model,
  a larger ``context_window`` or a smaller ``max_tokens`` is needed); the engine records
  ``context_overflow``.

``counters`` keeps the kinds apart; every reply carries them in ``Reply.extra``.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
import zlib
from typing import Any, Sequence

from engine.actions import MAX_REPLY_CHARS, EnvelopeError, Message, parse_envelope
from engine.observe import (
    DecisionObservation,
    SeatBriefing,
    TurnObservation,
    VoluntaryObservation,
)
from engine.protocol import PROTOCOLS as TYPED_PROTOCOLS
from engine.seats import Reply
from personas import quick

from .client import CallResult, complete, failure_words, fetch_models
from .context import Estimator, digest_block, fits, message_rounds, window_from_models
from .prompts import COMPACT_BELOW, PromptBook, fragment
from .talk import TalkFacts, expand_short, short_record

# An LLM seat on a model with a context window this small or smaller (SmolLM2, Gemma 3 270M,
# most GGUF builds run at 8k) talks on every turn it is given: unless max_calls_per_round
# says otherwise it gets SMALL_MODEL_CALLS CHEAP_TALK calls per round (issue 22).
SMALL_WINDOW = 8192
SMALL_MODEL_CALLS = 4
# ... and its DECISION requests sample greedily unless the settings name a temperature: at
# the server's default (llama.cpp: 0.8) SmolLM2-135M wrote another slot than the one the talk
# settled on and its DECISION message's example named (docs/llm.md, "Small local models").
SMALL_MODEL_TEMPERATURE = 0.0
from .schema import (THINKING_MAX, THINKING_SHORT, drop_keywords, envelope_schema, reflection_schema, refused_keywords,
                     response_format, with_one_action, with_thinking_limit, without_kinds)
from .decide import build_decision, decision_slot_schema
from .settings import LLMConfigError, LLMSettings

__all__ = ["LLMPersona"]

#: A message agreeing to a slot ("Agreed: Meeting M2 at slot 7.", "Let's schedule ... at slot 7",
#: "I agree to slot 7"): how a seat tells that every participant has settled.
_AGREE_RE = re.compile(r"(?:\bagree[sd]?\b|let'?s\s+(?:schedule|meet)|\bdecision\b|\bconfirm(?:ed|ing)?\b"
                       r"|\bsettled?\b)[^.?!]*?\bslot\s+(\d+)", re.I)

COUNTER_KEYS = ("calls", "requests", "retries", "agent_failures", "parse_errors", "infra_failures",
                "rate_limited", "server_errors", "timeouts", "connection_errors", "context_length",
                "http_errors", "bad_responses", "reflections", "reflection_failures", "config_failures",
                "context_overflow", "context_trims", "format_fallbacks", "truncated_repaired", "oversized",
                "capped_turns", "schema_keywords_dropped")
#: The smallest reply budget a request is shrunk to before the thread itself must shrink.
MIN_REPLY_TOKENS = 256
#: The request forms ``structured="auto"`` tries, in order (see ``personas.llm.schema``).
AUTO_FORMS = ("json_schema", "json_object", "json_object_plain", "off")
#: What each client failure kind means for the results: infrastructure (the endpoint) or
#: configuration (the seat's settings); unreadable replies are the agent's.
FAILURE_NAMES = {"connection": "unreachable", "timeout": "unreachable", "rate_limit": "rate_limited",
                 "server_error": "server_error", "http_error": "endpoint_error", "bad_response": "endpoint_error"}
_KIND_COUNTER = {"rate_limit": "rate_limited", "server_error": "server_errors", "timeout": "timeouts",
                 "connection": "connection_errors", "context_length": "context_length",
                 "http_error": "http_errors", "bad_response": "bad_responses"}


class LLMPersona:
    """A seat played by a chat model.  See the module docstring."""

    kind = "llm"

    def __init__(self, settings: LLMSettings, *, model: str | None = None, variant: str | None = None,
                 client: Any = None) -> None:
        self.settings = settings
        self.model_name = model or settings.model
        if not self.model_name:
            raise ValueError("an LLM seat needs a model name (llm:MODEL)")
        self.variant = variant if variant is not None else settings.variant
        self.model = f"llm:{self.model_name}"
        self._client = client
        self._own_client = client is not None
        self.reflection = settings.reflection
        self.messages: list[dict[str, str]] = []
        self.counters: dict[str, int] = {k: 0 for k in COUNTER_KEYS}
        self.book: PromptBook | None = None
        self.prompt_profile = "full"
        self.seat: int | None = None
        self._rng = random.Random(0)
        self._seen: dict[int, int] = {}  # round -> delivered messages already shown
        self._joined: set[int] = set()  # rounds in which a non-participant had its first message
        self._notice = ""
        self._round_calls: dict[int, int] = {}  # round -> CHEAP_TALK calls sent (max_calls_per_round)
        self._agreements: dict[int, dict[int, int]] = {}  # round -> {agent: slot it last agreed to}
        self._said: dict[int, list[tuple[int, Message]]] = {}  # round -> (turn, message) this seat sent
        self._talk: TalkFacts | None = None  # this round's talk as the seat saw it (personas.llm.talk)
        self._protocols: dict[int, str] = {}  # agent -> the protocol of its typed messages to this seat
        self._reset_context()

    def _reset_context(self) -> None:
        # The context budget (personas.llm.context): rounds < _upto are sent as a digest.
        self._upto = 0
        self._window: int | None = self.settings.context_window
        self._window_source: str | None = "configured" if self._window else None
        self._probed = False
        # One estimate per endpoint and model for the whole run: every seat's usage calibrates it.
        self._est = self.settings.pool.estimators.setdefault((self.settings.resolved_base_url(), self.model_name),
                                                             Estimator())
        mode = self.settings.structured_mode()
        self._forms: tuple[str, ...] = AUTO_FORMS if mode == "auto" else (mode,)
        self._form_i = 0
        self._rform_i = 0  # reflection questions keep their own fallback (their schema differs)
        self._dropped: frozenset[str] = frozenset()  # schema keywords the endpoint refused (structured=auto)
        self._margin_off = False  # set after a context-length 400: over-estimate requests are no longer sent

    # -- plumbing -------------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            self._client = self.settings.pool.client(self.settings)
        return self._client

    @property
    def structured_used(self) -> str:
        """The request form this seat uses now (``auto`` settles on the first the endpoint takes)."""
        return self._forms[min(self._form_i, len(self._forms) - 1)]

    @property
    def context_window(self) -> int | None:
        return self._window

    def describe(self) -> dict[str, Any]:
        """Settings a trace may record: model, variant, endpoint, sampling (never the key)."""
        return {**self.settings.public(), "model": self.model_name, "variant": self.variant}

    async def aclose(self) -> None:
        """Close a client this persona was given (pool clients are closed by the pool)."""
        if self._own_client and self._client is not None:
            await self._client.close()

    # -- the persona interface ------------------------------------------------------------
    async def register(self, briefing: SeatBriefing) -> str:
        self.seat = briefing.view.seat
        self._rng = random.Random(zlib.crc32(f"{self.model_name}:{self.seat}".encode()))
        self._reset_context()
        self.prompt_profile = await self._choose_profile()
        self.book = PromptBook(briefing, self.variant, self.prompt_profile, short_thinking=self.short_thinking)
        self.book.decision_mode = self.settings.decision
        self._said.clear()
        system = self.book.system_prompt()
        self.messages = [{"role": "system", "content": system}]
        self._seen.clear()
        self._joined.clear()
        self._round_calls.clear()
        self._agreements.clear()
        self._talk = None
        self._protocols.clear()
        self._notice = ""
        return system

    async def _choose_profile(self) -> str:
        """``prompt``: full or compact as set; ``auto`` is compact when the context window
        (configured, else from ``/v1/models``, asked once now) is under
        :data:`~personas.llm.prompts.COMPACT_BELOW` tokens.  Decided once per game: the
        system prompt never changes mid-game."""
        choice = self.settings.prompt
        if self._window is None:  # also decides short thinking (short_thinking), whatever the profile
            try:
                await self._probe_window(self.client)
            except LLMConfigError:  # no key yet: the first call reports it
                pass
        if choice != "auto":
            return choice
        return "compact" if self._window is not None and self._window < COMPACT_BELOW else "full"

    @property
    def history(self) -> str:
        """The history mode in force: the compact profile digests finished rounds under ``auto``."""
        h = self.settings.history
        return "digest" if h == "auto" and getattr(self, "prompt_profile", "full") == "compact" else h

    @property
    def short_thinking(self) -> bool:
        """A context window of :data:`SMALL_WINDOW` tokens or less (a small local model, for
        which ``thinking`` was most of each call's generated tokens): ``thinking`` is optional
        and at most :data:`~personas.llm.schema.THINKING_SHORT` characters."""
        return self._window is not None and self._window <= SMALL_WINDOW

    def sampling(self, obs) -> dict[str, Any]:
        """The sampling fields of the request for ``obs``: the settings' (only those set), and
        for a CHEAP_TALK turn or a DECISION of a small model (:attr:`short_thinking`: a window
        of :data:`SMALL_WINDOW` tokens or less) ``temperature`` :data:`SMALL_MODEL_TEMPERATURE`
        when the settings leave it unset — a temperature the user set is always sent as set.
        A retry after a rejected batch (``obs.rejection``), VOLUNTARY and reflection requests
        carry the settings' fields only: greedy, SmolLM2-135M wrote the refused reply again on
        every retry (12 of 12)."""
        out = self.settings.sampling()
        first_decision = isinstance(obs, DecisionObservation) and obs.rejection is None
        if ((first_decision or isinstance(obs, TurnObservation)) and self.short_thinking
                and self.settings.temperature is None):
            out["temperature"] = SMALL_MODEL_TEMPERATURE
        return out

    def prompt(self, obs) -> str | None:
        """The user message that :meth:`speak` / :meth:`volunteer` / :meth:`decide` will send."""
        if self.book is None or self._capped(obs):
            return None
        if isinstance(obs, DecisionObservation):  # its talk facts count the seat's own messages too
            return self.book.decision_message(obs, seen=self._seen.get(obs.round, 0), notice=self._notice,
                                              own=self._said.get(obs.round, ()))
        facts = self._facts_now(obs) if isinstance(obs, TurnObservation) else None
        intro = (isinstance(obs, TurnObservation) and obs.is_participant
                 and obs.round not in message_rounds(self.messages))
        return self.book.user_message(obs, seen=self._seen.get(obs.round, 0), joined=obs.round in self._joined,
                                      notice=self._notice, done_slot=self._talk_done(obs), facts=facts, intro=intro)

    # -- the round's talk (personas.llm.talk) ---------------------------------------------
    def _round_facts(self, round_: int) -> TalkFacts:
        if self._talk is None or self._talk.round != round_:
            self._talk = TalkFacts(round_)
        return self._talk

    def _facts_now(self, obs: TurnObservation) -> TalkFacts:
        """This round's talk including what this turn delivers (a copy: :meth:`prompt` is pure)."""
        base = self._talk if self._talk is not None and self._talk.round == obs.round else TalkFacts(obs.round)
        facts = copy.deepcopy(base)
        facts.read(obs.inbox, obs.view.num_slots)
        facts.agreed = self._agreements.get(obs.round, {}).get(self.seat)
        return facts

    def _note_protocols(self, msgs) -> None:
        for m in msgs:
            p = m.get("payload") if isinstance(m, dict) else m.payload
            sender = m.get("from_agent") if isinstance(m, dict) else m.sender
            if isinstance(p, dict) and p.get("protocol") in TYPED_PROTOCOLS and isinstance(sender, int):
                self._protocols[sender] = p["protocol"]

    def _expand(self, obs, env) -> tuple[list[Message], list[dict[str, Any]], list[str]]:
        """The messages the reply's short actions stand for, what the trace records of each,
        and notes for the next prompt (a short action that stood for nothing, and why)."""
        msgs: list[Message] = []
        records: list[dict[str, Any]] = []
        notes: list[str] = []
        if not isinstance(obs, TurnObservation):
            if env.short:
                notes.append("talk actions (costs, propose, ask_costs) work only in CHEAP_TALK")
            return msgs, records, notes
        facts = self._round_facts(obs.round)
        for kind, slot in env.short:
            out, note = expand_short(kind, slot, obs, self.seat, facts, self._protocols)
            msgs.extend(out)
            records.append(short_record(kind, slot, out, note))
            if note:
                notes.append(note)
        if env.agreed:
            out = self._agree_messages(obs, env.agreed)
            msgs.extend(out)
            records.append(short_record("agree", env.agreed[-1], out))
        return msgs, records, notes

    # -- ending the talk ------------------------------------------------------------------
    def _capped(self, obs) -> bool:
        """Whether this CHEAP_TALK turn is past the seat's ``max_calls_per_round``."""
        cap = self.calls_cap
        return (cap is not None and isinstance(obs, TurnObservation)
                and self._round_calls.get(obs.round, 0) >= cap)

    @property
    def calls_cap(self) -> int | None:
        """CHEAP_TALK calls per round: ``max_calls_per_round`` when set; unset, a model whose
        context window is at most :data:`SMALL_WINDOW` tokens (a small local model, which
        rarely ends its turn by itself) gets :data:`SMALL_MODEL_CALLS`, any other none."""
        cap = self.settings.max_calls_per_round
        if cap is None and self._window is not None and self._window <= SMALL_WINDOW:
            return SMALL_MODEL_CALLS
        return cap

    @property
    def drops_idle_passes(self) -> bool:
        """Whether a pass at a CHEAP_TALK turn that delivered nothing leaves the model's thread
        (``idle_passes``: ``drop``; ``auto`` drops for a model whose context window is at most
        :data:`SMALL_WINDOW` tokens, else keeps)."""
        mode = self.settings.idle_passes
        if mode == "auto":
            return self.short_thinking
        return mode == "drop"

    def _idle_pass(self, obs, notice: str, actions: Sequence[Any], notes: Sequence[str], repaired: bool) -> bool:
        """A reply that passed at a CHEAP_TALK turn that delivered nothing (and carried no note
        about an earlier reply): with :attr:`drops_idle_passes` its request and reply leave
        the thread — the trace keeps the call.  SmolLM2-135M copied such a pass at its next
        turn, when a cost request had arrived (canonical:2, two LLM seats: seat 3 in round 0 and
        seat 1 in round 2 left IMAP's request unanswered, IMAP decided on slots blocked for them
        and both meetings were lost); asked with the request in its first message of the
        round, it answered."""
        return (self.drops_idle_passes and isinstance(obs, TurnObservation) and not obs.inbox and not notice
                and not actions and not notes and not repaired)

    def _note_agreements(self, round_: int, sender: int, content: str) -> None:
        for m in _AGREE_RE.finditer(content or ""):
            self._agreements.setdefault(round_, {})[sender] = int(m.group(1))

    def _talk_done(self, obs) -> int | None:
        """The slot every participant has agreed to this round (counting the messages this
        turn delivers), when the seat is a participant and has agreed to it too; else None."""
        if not isinstance(obs, TurnObservation) or not obs.is_participant:
            return None
        agreed = dict(self._agreements.get(obs.round, {}))
        for m in obs.inbox:
            for a in _AGREE_RE.finditer(m.content or ""):
                agreed[m.sender] = int(a.group(1))
        slots = {agreed.get(p) for p in obs.meeting.participants}
        return slots.pop() if len(slots) == 1 and None not in slots else None

    def _agree_messages(self, obs, slots) -> list[Message]:
        """The messages an ``{"type": "agree", "slot": n}`` short action stands for: "Agreed:
        Meeting Mk at slot n." to the meeting's other participants, on the first enabled
        channel that reaches them.  From the meeting's lowest id (the one IMAP seats wait
        for) the DMs announce the slot instead (``personas.quick.propose``: "Let's meet at slot
        n for meeting Mk.", typed in the protocol the recipient wrote to this seat in — IMAP's
        ``decision`` — else English, which the bots adopt).  SmolLM2-135M agreed to a slot as
        the opener of Meeting M4; "Agreed: …" left the IMAP seats waiting for a decision."""
        if not slots or not isinstance(obs, TurnObservation):
            return []
        slot = slots[-1]
        if not isinstance(slot, int) or isinstance(slot, bool):
            raise EnvelopeError(f"an agree action needs an integer slot, got {slot!r}")
        m = obs.meeting
        text = f"Agreed: Meeting M{m.id} at slot {slot}."
        others = [p for p in m.participants if p != self.seat]
        channels = obs.view.channels
        if "participant_groupchat" in channels and obs.is_participant:
            return [Message("participant_groupchat", text)]
        if "dm" in channels:
            if self.seat == min(m.participants):  # the opener's agreement announces the slot (IMAP's decision)
                return [msg for p in others for msg in
                        quick.propose(self.seat, m.id, [slot], channel="dm", to=[p], protocol=self._protocols.get(p))]
            return [Message("dm", text, p) for p in others]
        return [Message("all_groupchat", text)] if "all_groupchat" in channels else []

    async def speak(self, obs: TurnObservation) -> Reply:
        return await self._call(obs)

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        return await self._call(obs)

    async def decide(self, obs: DecisionObservation) -> Reply:
        return await self._call(obs)

    async def resume(self, own_events: list[dict[str, Any]]) -> None:
        """Rebuild this seat's thread from its own events of a stopped game (``--resume``).

        The engine calls it after :meth:`register` with the seat's events of the complete
        rounds it folded.  The thread becomes exactly what the live seat had: the system
        prompt of its ``agent_registered`` event (regenerated when the trace has none),
        then per game call the recorded ``prompt_sent`` as the user message and, when the
        model answered with some text, that ``text`` as the assistant message — the same
        rule :meth:`_call` follows (an endpoint failure leaves the user message alone; an
        unreadable reply is kept; an idle pass, ``extra.idle_pass``, leaves both out).  Also
        restored: the note the next prompt carries about a failed last call (``parse_notice``
        / ``infra_notice``), the context budget (digested rounds, learned window, estimate
        calibration) and the structured-output form in use (both from the last call's
        ``extra``), what each round's messages showed of the inbox (``_seen`` / ``_joined``;
        only the round being played reads them, and a resume starts a fresh one) and the
        counters (the last reply's ``extra.counters`` plus the reflections recorded after it;
        a reflection's retries are not in the trace).  The backoff jitter generator starts
        again from its seed.
        """
        if self.book is None:
            raise RuntimeError("register() must be called before resume()")
        system = next((e["data"]["system_prompt"] for e in own_events if e.get("type") == "agent_registered"
                       and isinstance((e.get("data") or {}).get("system_prompt"), str)), None)
        messages: list[dict[str, str]] = [{"role": "system", "content": system or self.book.system_prompt()}]
        counters = {k: 0 for k in COUNTER_KEYS}
        seen: dict[int, int] = {}
        talked: set[int] = set()  # rounds with a CHEAP_TALK turn
        decided: set[int] = set()  # rounds with a DECISION call (participants only)
        notice = ""
        prompt: str | None = None  # the open call's user message
        failure_detail: str | None = None  # from the error event between a call's start and end
        context: dict[str, Any] | None = None
        form: str | None = None
        for ev in own_events:
            t, d = ev.get("type"), ev.get("data") or {}
            r = d.get("round")
            if t in ("turn_start", "decide_start"):
                prompt, failure_detail = d.get("prompt_sent"), None
                if t == "turn_start":
                    talked.add(r)
                    seen[r] = seen.get(r, 0) + len(d.get("inbox_drained") or ())
                    self._note_protocols([m for m in d.get("inbox_drained") or () if isinstance(m, dict)])
                elif d.get("phase") == "DECISION":
                    decided.add(r)
            elif t in ("parse_error", "seat_timeout", "context_overflow") and prompt is not None:
                failure_detail = d.get("detail")
            elif t in ("turn_end", "decide_end") and prompt is not None:
                extra = d.get("extra") if isinstance(d.get("extra"), dict) else {}
                kept = not extra.get("idle_pass")  # an idle pass left the live thread: see _call
                if kept:
                    messages.append({"role": "user", "content": prompt})
                prompt = None
                text = d.get("text")
                failure = extra.get("failure")
                if kept and isinstance(text, str) and text.strip() and failure in (None, "parse_error"):
                    if extra.get("truncated_repaired"):
                        try:
                            text = repaired_text(parse_envelope(text, truncated=True))
                        except EnvelopeError:
                            pass
                    messages.append({"role": "assistant", "content": text})
                if isinstance(extra.get("counters"), dict):
                    counters.update({k: v for k, v in extra["counters"].items() if k in counters})
                else:  # the engine answered for the seat (a timeout): the call still counted
                    counters["calls"] += 1
                if isinstance(extra.get("context"), dict):
                    context = extra["context"]
                if isinstance(extra.get("structured"), str):
                    form = extra["structured"]
                if isinstance(extra.get("schema_dropped"), list):
                    self._dropped = frozenset(str(k) for k in extra["schema_dropped"])
                notice = ""
                if failure == "parse_error":
                    notice = fragment("parse_notice", detail=failure_detail or "no detail")
                elif failure is not None and failure != "context_overflow":
                    notice = fragment("infra_notice")
            elif t == "reflection":
                counters["reflections"] += 1
                if d.get("error"):
                    counters["reflection_failures"] += 1
                counters["requests"] += 1
        self.messages = messages
        self.counters = counters
        self._seen = seen
        self._joined = talked - decided
        self._notice = notice
        if context:
            self._upto = int(context.get("digested_upto") or 0)
            if context.get("window") and not self.settings.context_window:
                self._window, self._window_source = int(context["window"]), context.get("window_source")
            self._probed = bool(context.get("probed", self._probed))
            if context.get("ratio"):
                self._est.ratio = float(context["ratio"])
        if form in self._forms:
            self._form_i = self._forms.index(form)

    # -- one game call --------------------------------------------------------------------
    def _shown(self, obs) -> None:
        """Remember what this message showed, so the next one does not repeat it."""
        r = obs.round
        if isinstance(obs, TurnObservation):
            self._seen[r] = self._seen.get(r, 0) + len(obs.inbox)
            self._round_facts(r).read(obs.inbox, obs.view.num_slots)
            self._note_protocols(obs.inbox)
            for m in obs.inbox:
                self._note_agreements(r, m.sender, m.content)
            if not obs.is_participant:
                self._joined.add(r)
        elif obs.attempt == 0:
            self._seen[r] = len(obs.round_messages)
        self._notice = ""

    def _context_info(self, est: int | None = None, trimmed: list[int] | None = None,
                      kept: int | None = None) -> dict[str, Any] | None:
        if self._window is None and not self._upto and not trimmed:
            return None
        info: dict[str, Any] = {"window": self._window, "window_source": self._window_source,
                                "digested_upto": self._upto, "ratio": self._est.ratio, "probed": self._probed}
        if est is not None:
            info["est_prompt_tokens"] = est
        if trimmed:
            info["trimmed_rounds"] = trimmed
        if kept is not None:
            info["digest_rounds_kept"] = kept
        return info

    def _extra(self, res: CallResult | None, failure: str | None = None, *, context: dict | None = None,
               structured: str | None = None) -> dict[str, Any]:
        extra: dict[str, Any] = {"counters": dict(self.counters)}
        if res is not None:
            extra.update(attempts=res.attempts, wall_ms=res.wall_ms, queue_ms=res.queue_ms)
            if res.attempt_log:  # per attempt: endpoint, outcome, latency, limits, reply budget (calbench replay)
                extra["attempt_log"] = res.attempt_log
            if res.retried:
                extra.update(retried=list(res.retried), waits=list(res.waits))
            if res.reasoning:
                extra["reasoning"] = res.reasoning
            if res.finish_reason and res.finish_reason != "stop":
                extra["finish_reason"] = res.finish_reason
        if self.prompt_profile != "full":
            extra["prompt_profile"] = self.prompt_profile
        if structured is not None:
            extra["structured"] = structured
            if self._dropped and structured not in ("off", "json_object_plain"):
                extra["schema_dropped"] = sorted(self._dropped)
        if context:
            extra["context"] = context
        if failure:
            extra["failure"] = failure
            extra["failure_kind"] = FAILURE_NAMES.get(failure, failure)
        return extra

    def _count(self, res: CallResult) -> None:
        self.counters["requests"] += res.attempts
        self.counters["retries"] += len(res.retried)
        for kind in res.retried:
            self.counters[_KIND_COUNTER[kind]] += 1
        if res.failure:
            self.counters[_KIND_COUNTER[res.failure]] += 1

    def _windows(self) -> tuple[dict, tuple]:
        """The run's shared cache of context windows per (endpoint, model), and this seat's key."""
        cache = self.settings.pool.model_windows
        return cache, (self.settings.resolved_base_url(), self.model_name)

    async def _probe_window(self, client: Any) -> None:
        """Once per endpoint and model (shared by the run's seats): ``/v1/models`` metadata,
        or a window another seat of the run already learned from a 400."""
        if self._window is not None:
            return
        cache, key = self._windows()
        learned = cache.get(("error",) + key)
        if learned:
            self._window, self._window_source = learned, "error"
            return
        if self._probed:
            return
        self._probed = True
        if key not in cache:
            cache[key] = window_from_models(await fetch_models(client, min(10.0, self.settings.timeout)),
                                            self.model_name)
        if cache[key]:
            self._window, self._window_source = cache[key], "models"

    def _request(self, extra: list[dict[str, str]] = (), *, commit: bool = True, margin: bool = True
                 ) -> tuple[list[dict[str, str]] | None, dict[str, Any]]:
        """The messages to send now: the thread trimmed to fit the window (see ``context``).

        Tried in order until the request plus its reply budget fits: (1) digest every
        finished round at once (one prompt-cache cliff, not one per round: the system prompt
        and digest then stay the prefix of every later request until the window is full
        again); (2) a smaller reply budget, down to
        :data:`MIN_REPLY_TOKENS` (``info["reply_tokens"]``); (3) a shorter digest, oldest
        paragraphs first; (4) the oldest turns of the current round left out, in
        user/assistant pairs after its first message (``info["dropped_messages"]``).
        Returns ``(None, info)`` when none fits — by more than the estimate's own error
        (``Estimator.margin``): a request that fits within that margin is sent
        (``info["within_margin"]``) and the server decides; ``margin=False`` after the
        server refused one.  ``commit=False`` (reflection) leaves the seat's digest point
        where it was.
        """
        margin = margin and not self._margin_off
        msgs = self.messages + list(extra)
        rounds = message_rounds(msgs)
        current = max(rounds[-1], 0)
        mode = self.history
        # Once condensed (auto), every finished round is condensed as the next begins: the system
        # prompt and its digest only grow at their end, so each request still extends the cached
        # prefix of the one before and nothing already sent is sent again after it.
        condensed = mode == "digest" or (mode == "auto" and self._upto > 0)
        upto = max(self._upto, current) if condensed else self._upto
        n = len(self.messages)
        want = self.settings.max_tokens

        def build(upto_: int, keep: int | None = None, drop: int = 0) -> list[dict[str, str]]:
            system = msgs[0]["content"] + digest_block(msgs, rounds, upto_, keep)
            kept = [m for m, r in zip(msgs[1:n], rounds[1:n]) if r >= upto_]
            if drop:  # after the round's first message, never the message being answered
                kept = kept[:1] + kept[1 + drop:]
                system += "\n\n(Some earlier turns of this round are left out to fit the context.)"
            return [{"role": "system", "content": system}] + kept + list(extra)

        req = build(upto)
        est = self._est.tokens(req)
        info_more: dict[str, Any] = {}
        kept = None
        window = self._window
        if window is not None and mode == "full" and not fits(est, window, want):
            if not (margin and fits(self._est.low(est), window, want)):
                return None, {"window": window, "est_prompt_tokens": est, "max_tokens": want}
            info_more["within_margin"] = True  # send it: the server's count decides
        if window is not None and mode != "full":
            floor = min(MIN_REPLY_TOKENS, want or MIN_REPLY_TOKENS)

            def room(e: int) -> int:  # reply tokens left beside a prompt of e tokens
                return window - e - math.ceil(window * 0.04) - 16

            if upto < current and (not fits(est, window, want)
                                   or not fits(est + _round_growth(msgs[:n], rounds[:n], current, self._est), window,
                                               want)):
                # (1) every finished round at once — now, at the round's first call, when the round
                # would not fit growing half as much again as the largest earlier round did, so the
                # cache cliff falls where nothing of this round has been sent yet
                upto = current
                req = build(upto)
                est = self._est.tokens(req)
            ok = fits(est, window, want) or room(est) >= floor  # (2)
            if not ok:  # (3)
                for kept in range(upto - 1, -1, -1):
                    req = build(upto, kept)
                    est = self._est.tokens(req)
                    if room(est) >= floor:
                        ok = True
                        break
            if not ok:  # (4)
                in_round = sum(1 for r in rounds[1:n] if r >= upto)
                for drop in range(2, max(0, in_round - 1), 2):
                    req = build(upto, 0 if upto else None, drop)
                    est = self._est.tokens(req)
                    if room(est) >= floor:
                        ok = True
                        info_more["dropped_messages"] = drop
                        break
            if not ok and margin and room(self._est.low(est)) >= floor:
                # Over the estimate, but within its own error: send it and let the server's 400 decide.
                info_more["within_margin"] = True
                info_more["reply_tokens"] = floor
            elif not ok:
                return None, {"window": window, "est_prompt_tokens": est, "max_tokens": want}
            elif not fits(est, window, want):
                info_more["reply_tokens"] = min(want or room(est), room(est))
        trimmed = list(range(self._upto, upto)) if upto > self._upto else []
        if commit and trimmed:
            self._upto = upto
            self.counters["context_trims"] += 1
        info = {**(self._context_info(est, trimmed if commit else None, kept) or {}), **info_more}
        if not commit:
            info = {**info, "digested_upto": upto}
        return req, info

    def _learn_window(self, res: CallResult, req: list[dict[str, str]], reply: int | None = None) -> None:
        """After a context-length 400: take the window the error states (else a guess), and
        make the estimate of this request large enough that it no longer 'fits'."""
        est = self._est.tokens(req)
        self._margin_off = True  # the server has refused once: no more benefit of the doubt for this seat
        window = res.context_window or self._window or int((est + (self.settings.max_tokens or 0)) * 0.8)
        if self._window is not None and res.context_window is None:
            window = min(window, self._window)
        self._window, self._window_source = window, ("error" if res.context_window else "guessed")
        if res.context_window:  # the other seats of the run on this endpoint and model need not hit it too
            cache, key = self._windows()
            cache[("error",) + key] = window
        reply = reply if reply is not None else self.settings.max_tokens
        if fits(est, window, reply):  # we thought it fitted: the tokenizer counts more
            need = window - (reply or 0) - 16
            self._est.ratio = round(self._est.ratio * (need + 1) / max(1, est) * 1.05 + 0.01, 4)

    def _overflow(self, text: str, info: dict[str, Any], res: CallResult | None = None) -> Reply:
        self.counters["config_failures"] += 1
        self.counters["context_overflow"] += 1
        window = info.get("window") or (res.context_window if res is not None else None)
        if self.settings.history == "full":
            what = "the whole conversation (history = full: nothing is digested) needs"
        else:
            what = "the system prompt and this round need"
        detail = (f"context_overflow: {what} about {info.get('est_prompt_tokens')} tokens plus "
                  f"{self.settings.max_tokens} for the reply, more than the context window of "
                  f"{f'{window} tokens' if window else 'the model'}; use a model with a longer context, raise "
                  f"context_window or lower max_tokens")
        return Reply(prompt=text, error="context_overflow", error_detail=detail, latency_ms=0.0 if res is None
                     else res.latency_ms, extra=self._extra(res, "context_overflow", context=info))

    async def _send(self, client: Any, extra_msgs: list[dict[str, str]], schema: dict[str, Any], *,
                    commit: bool = True, name: str = "calbench_envelope", sampling: dict[str, Any] | None = None
                    ) -> tuple[CallResult | None, dict[str, Any], str]:
        """One call with the context budget and the structured-output fallback (``sampling``:
        the request's sampling fields, else the settings').

        Returns ``(result or None when nothing could be sent, context info, form used)``.
        """
        req, info = self._request(extra_msgs, commit=commit)
        if req is None:
            return None, info, self.structured_used
        ctx_tries = 0
        attr = "_form_i" if commit else "_rform_i"
        shared = self.settings.pool.formats
        fkey = (self.settings.resolved_base_url(), self.model_name, attr, self._forms)
        if shared.get(fkey, 0) > getattr(self, attr):  # another seat of the run found a form refused
            setattr(self, attr, shared[fkey])
        self._dropped = self._dropped | shared.get(("dropped",) + fkey[:2], frozenset())
        while True:
            i = getattr(self, attr)
            form = self._forms[min(i, len(self._forms) - 1)]
            res = await complete(client, req, self.settings, model=self.model_name, rng=self._rng,
                                 response_format=response_format(form, drop_keywords(schema, self._dropped), name),
                                 max_tokens=info.get("reply_tokens") if info else None, sampling=sampling)
            self._count(res)
            refused = (refused_keywords(res.failure_detail) if res.failure == "http_error"
                       and res.status in (400, 415, 422) and form not in ("off", "json_object_plain") else [])
            refused = [k for k in refused if k not in self._dropped]
            if refused and len(self._forms) > 1:  # auto: the server refused a keyword; drop it, keep the form
                self._dropped = self._dropped | frozenset(refused)
                shared[("dropped",) + fkey[:2]] = shared.get(("dropped",) + fkey[:2], frozenset()) | self._dropped
                self.counters["schema_keywords_dropped"] += len(refused)
                continue
            if (res.failure == "http_error" and res.status in (400, 415, 422) and form != "off"
                    and i < len(self._forms) - 1):
                setattr(self, attr, i + 1)  # the endpoint refused this response_format: try the next form
                shared[fkey] = max(shared.get(fkey, 0), i + 1)
                self.counters["format_fallbacks"] += 1
                continue
            if res.failure == "context_length" and ctx_tries < 3 and self.settings.history != "full":
                ctx_tries += 1
                self._learn_window(res, req, (info or {}).get("reply_tokens"))
                req, info = self._request(extra_msgs, commit=commit, margin=False)
                if req is None:
                    return res, info, form
                continue
            if res.failure == "context_length":  # not fitted again (history = full, or tried enough)
                if self.settings.history == "full":  # the thread only grows: later calls fail without a request
                    self._learn_window(res, req, (info or {}).get("reply_tokens"))
                info = {**(info or {}), "est_prompt_tokens": self._est.tokens(req),
                        "window": (info or {}).get("window") or self._window or res.context_window}
            if res.ok and res.usage:
                self._est.observe(req, res.usage.get("prompt_tokens"))
                info = {**info, "ratio": self._est.ratio} if info else info
            return res, info, form

    async def _call(self, obs) -> Reply:
        if self.book is None:
            raise RuntimeError("register() must be called before the first turn")
        if self._capped(obs):  # past max_calls_per_round: a pass, without a request
            self.counters["capped_turns"] += 1
            return Reply(actions=(), latency_ms=0.0,
                         extra={**self._extra(None), "capped": self.calls_cap})
        notice = self._notice
        text = self.prompt(obs)
        self._shown(obs)
        self.counters["calls"] += 1
        if isinstance(obs, TurnObservation):
            self._round_calls[obs.round] = self._round_calls.get(obs.round, 0) + 1
        kept = len(self.messages)
        self.messages.append({"role": "user", "content": text})
        try:
            client = self.client
        except LLMConfigError as exc:  # no key, a bad endpoint: infrastructure, not the agent's fault
            self.counters["infra_failures"] += 1
            self._notice = fragment("infra_notice")
            return Reply(prompt=text, error="infra_error", latency_ms=0.0, error_detail=f"configuration: {exc}",
                         extra=self._extra(None, "config_error"))
        await self._probe_window(client)
        schema = self._schema(obs)
        if self.short_thinking:
            schema = with_thinking_limit(schema, THINKING_SHORT)
            if isinstance(obs, TurnObservation):
                schema = without_kinds(with_one_action(schema), self._repeats(obs))
        sampling = self.sampling(obs)
        res, info, form = await self._send(client, [], schema, sampling=sampling)
        if res is None or res.failure == "context_length":
            return self._overflow(text, info, res)
        if not res.ok:
            self.counters["infra_failures"] += 1
            self._notice = fragment("infra_notice")
            extra = self._extra(res, res.failure, context=info, structured=form)
            words = failure_words(res, self.settings)
            if words:  # what a person at the table reads (outside study games)
                extra["failure_words"] = words
            return Reply(prompt=text, error="infra_error", error_detail=res.failure_detail,
                         latency_ms=res.latency_ms, usage=res.usage, extra=extra)
        raw_text = res.text or ""
        raw = res.raw
        if len(raw_text) > MAX_REPLY_CHARS:  # never kept whole: not in the thread, the trace or a later request
            self.counters["oversized"] += 1
            raw_text = (raw_text[:1000] + f" [... {len(res.text) - 1000:,} more characters of this reply were not "
                        "kept]")
            raw = None
            detail = (f"the reply was {len(res.text):,} characters long; at most {MAX_REPLY_CHARS:,} are read")
            self.messages.append({"role": "assistant", "content": raw_text})  # as --resume rebuilds it
            return self._unreadable(text, raw_text, raw, res, info, form, detail)
        if raw_text.strip():
            self.messages.append({"role": "assistant", "content": raw_text})
        truncated = res.finish_reason == "length"
        try:
            env = parse_envelope(raw_text, truncated=truncated)
            expanded, shorts, notes = self._expand(obs, env)
            actions = env.actions + tuple(expanded)
            if env.repaired:  # the thread shows the model a closed reply, not a broken one to imitate
                self.messages[-1] = {"role": "assistant", "content": repaired_text(env)}
        except EnvelopeError as exc:
            detail = str(exc)
            if truncated:
                detail += f" (the reply was cut off: {self._cut_by(res, info)})"
            return self._unreadable(text, raw_text, raw, res, info, form, detail)
        if env.repaired:
            self.counters["truncated_repaired"] += 1
            self._notice = fragment("repaired_notice", limit=self._cut_by(res, info))
        if notes:
            self._notice = "\n".join(filter(None, [self._notice, fragment("short_notice", detail="; ".join(notes))]))
        extra = self._extra(res, context=info, structured=form)
        if sampling != self.settings.sampling():  # the seat's own choice (a small model's DECISION)
            extra["sampling"] = sampling
        if env.repaired:
            extra["truncated_repaired"] = True
        if self._idle_pass(obs, notice, actions, notes, env.repaired):
            del self.messages[kept:]  # resume() drops it the same way
            extra["idle_pass"] = True
        if shorts:  # each short action as written and the messages the seat sent for it
            extra["short_actions"] = shorts
        if isinstance(obs, TurnObservation):
            facts = self._round_facts(obs.round)
            for a in actions:
                if isinstance(a, Message):
                    self._note_agreements(obs.round, self.seat, a.content)
                    self._said.setdefault(obs.round, []).append((obs.turn, a))
                    if facts.cost_request and (a.type != "dm" or a.to == facts.cost_request[0]):
                        facts.answered.add(facts.cost_request[0])  # the seat wrote back to whoever asked
        elif isinstance(obs, DecisionObservation) and self.settings.decision == "slot":
            built = build_decision(obs.view.calendar, obs.meeting.id, actions)
            actions = built.actions
            extra["decision"] = built.record()
        return Reply(actions=actions, thinking=env.thinking if env.thinking is not None else res.reasoning,
                     text=raw_text, usage=res.usage, latency_ms=res.latency_ms, raw=raw, prompt=text, extra=extra)

    def _schema(self, obs) -> dict[str, Any]:
        """The reply's JSON schema: DECISION by slot (``decision = "slot"``; for a small model
        the ``schedule`` alone, :func:`~personas.llm.decide.decision_slot_schema`) or the envelope's."""
        if isinstance(obs, DecisionObservation) and self.settings.decision == "slot":
            return decision_slot_schema(obs, moves=not self.short_thinking)
        return envelope_schema(obs)

    def _repeats(self, obs: TurnObservation) -> set[str]:
        """The short talk actions that would only repeat themselves this turn (not offered to a
        small model, :func:`~personas.llm.schema.without_kinds`): ``ask_costs`` once the seat
        asked this round, ``costs`` when no cost request to it is left unanswered."""
        facts = self._round_facts(obs.round)
        out = set()
        if facts.asked:
            out.add("ask_costs")
        if facts.open_request() is None:
            out.add("costs")
        return out

    def _unreadable(self, text: str, raw_text: str, raw: Any, res: CallResult, info: dict[str, Any] | None,
                    form: str, detail: str) -> Reply:
        self.counters["parse_errors"] += 1
        self.counters["agent_failures"] += 1
        self._notice = fragment("parse_notice", detail=detail)
        return Reply(prompt=text, text=raw_text, error="parse_error", error_detail=detail, usage=res.usage,
                     latency_ms=res.latency_ms, raw=raw,
                     extra=self._extra(res, "parse_error", context=info, structured=form))

    def _cut_by(self, res: CallResult, info: dict[str, Any] | None) -> str:
        """Which limit cut a reply off (``finish_reason: length``), in words."""
        info = info or {}
        if info.get("reply_tokens") is not None:
            return (f"the reply budget of {info['reply_tokens']} tokens, shrunk from max_tokens="
                    f"{self.settings.max_tokens} to fit the context window")
        usage = res.usage or {}
        used = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        window = self._window
        want = self.settings.max_tokens
        if window and used and (used >= window - 8 or (want and usage.get("completion_tokens", 0) < want * 0.9)):
            return f"the model's context was full ({window} tokens)"
        return f"max_tokens={want}"

    # -- reflection (paper F.3) -----------------------------------------------------------
    async def reflect(self, obs) -> dict[str, Any] | None:
        """Belief changes about every other seat, asked outside the game thread.

        Returns ``None`` when reflection is off (the game loop then records nothing).
        """
        if not self.reflection or self.book is None:
            return None
        question = self.book.reflection(obs)
        self.counters["reflections"] += 1
        try:
            client = self.client
        except LLMConfigError as exc:
            self.counters["reflection_failures"] += 1
            return {"prompt": question, "error": "infra_error", "error_detail": f"configuration: {exc}"}
        await self._probe_window(client)  # a window another seat learned from a 400 meanwhile
        # Not appended to the thread; fitted to the window like a game call, without moving its digest point.
        res, info, _form = await self._send(client, [{"role": "user", "content": question}],
                                            reflection_schema(obs), commit=False, name="calbench_reflection")
        if res is None or res.failure == "context_length":
            self.counters["reflection_failures"] += 1
            return {"prompt": question, "error": "context_overflow",
                    "error_detail": "context_overflow: the question does not fit the context window"}
        out: dict[str, Any] = {"prompt": question, "usage": res.usage, "latency_ms": res.latency_ms,
                               "raw": res.raw, "text": res.text}
        if not res.ok:
            self.counters["reflection_failures"] += 1
            out.update(error="infra_error", error_detail=res.failure_detail)
            return out
        deltas = _read_deltas(res.text or "")
        if deltas is None:
            self.counters["reflection_failures"] += 1
            out.update(error="parse_error", error_detail="no JSON object with 'deltas' in the reply")
        else:
            out["deltas"] = deltas
        return out


def _round_growth(msgs: list[dict[str, str]], rounds: list[int], current: int, est: Estimator) -> int:
    """At a round's first call (its one user message so far): what this round may still add —
    half as much again as the largest earlier round took after its first message (rounds
    differ: SmolLM2-135M's fourth round outgrew its second and was condensed at its DECISION
    call, mid-round).  0 at any other call."""
    if sum(1 for m, r in zip(msgs, rounds) if r == current and m.get("role") == "user") != 1 or rounds[-1] != current:
        return 0
    sizes: dict[int, list[dict[str, str]]] = {}
    for m, r in zip(msgs, rounds):
        if 0 <= r < current:
            sizes.setdefault(r, []).append(m)
    return math.ceil(1.5 * max((est.tokens(ms[1:]) for ms in sizes.values()), default=0))


def repaired_text(env) -> str:
    """What the thread keeps of a reply that was cut off and closed: the envelope as read,
    its ``thinking`` shortened to the schema's bound (a looping thought is not re-sent)."""
    thinking = env.thinking or ""
    if len(thinking) > THINKING_MAX:
        thinking = thinking[: THINKING_MAX - 1].rstrip() + "…"
    acts = ([a.to_json() for a in env.actions] + [{"type": "agree", "slot": s} for s in env.agreed]
            + [{"type": k, **({"slot": s} if s is not None else {})} for k, s in env.short])
    return json.dumps({"thinking": thinking, "actions": acts})


def _read_deltas(text: str) -> Any:
    """The ``deltas`` object of a reflection answer (in prose or a code fence), or None."""
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        try:
            obj, _ = dec.raw_decode(text[i:])
        except ValueError:
            continue
        if isinstance(obj, dict):
            if "deltas" in obj:
                return obj["deltas"]
            if obj and all(str(k).strip().isdigit() for k in obj):
                return obj
    return None
