"""Prompt texts for LLM seats: files beside the code, filled with :class:`string.Template`.

``prompts/system.md`` is the system prompt (the nine sections of paper A.2, in our own
words); ``prompts/{round_start,turn,joined,voluntary,decision,retry,reflection}.md`` are
the per-round user messages of paper A.3 / Table 4; ``prompts/fragments.md`` holds the
small pieces ("## name" sections).  ``variants/<name>.md`` is appended verbatim to the
system prompt for an adversarial variant (SPEC §10).

Every user message starts with one header line that names the round, the phase, the
meeting and the seat::

    === Round 2 of 5 · CHEAP_TALK · Meeting M3 · You are Agent 2 ===

The loopback mock server (``calbench_devtools.mock_endpoint``) and log readers parse it: keep
it stable.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any, Sequence

from engine.protocol import slots_phrase
from engine.observe import (
    DecisionObservation,
    Delivered,
    SeatBriefing,
    TurnObservation,
    VoluntaryObservation,
)
from personas.base import insertion_costs

from .talk import TalkFacts

__all__ = ["VARIANTS", "PROFILES", "COMPACT_BELOW", "PromptBook", "HEADER_RE", "load_variant", "template", "fragment"]

VARIANTS = ("nosy-highpressure", "redteam")
HEADER_RE = re.compile(
    r"^=== Round (?P<round>\d+) of (?P<rounds>\d+) · (?P<phase>[A-Z_]+) · Meeting M(?P<meeting>-?\d+) · "
    r"You are Agent (?P<seat>\d+) ===$", re.M)


@lru_cache(maxsize=None)
def _text(folder: str, name: str) -> str:
    return resources.files("personas.llm").joinpath(folder, name).read_text(encoding="utf-8")


#: Prompt profiles: ``full`` (``prompts/*.md``) and ``compact`` (``prompts/compact/*.md``:
#: the same rules and information in fewer tokens; a file it lacks comes from ``full``).
PROFILES = ("full", "compact")
#: Under this context window (tokens) ``prompt = "auto"`` uses the compact profile.
COMPACT_BELOW = 4096


def _exists(folder: str, name: str) -> bool:
    return resources.files("personas.llm").joinpath(folder, name).is_file()


def _folder(name: str, profile: str) -> str:
    if profile == "compact" and _exists("prompts/compact", name):
        return "prompts/compact"
    return "prompts"


@lru_cache(maxsize=None)
def template(name: str, profile: str = "full") -> Template:
    """``prompts/<name>.md`` (or the compact profile's) as a template (trailing newline dropped)."""
    return Template(_text(_folder(f"{name}.md", profile), f"{name}.md").rstrip("\n"))


@lru_cache(maxsize=2)
def _fragments(profile: str = "full") -> dict[str, str]:
    out: dict[str, str] = dict(_fragments("full")) if profile != "full" else {}
    folder = "prompts/compact" if profile != "full" else "prompts"
    if not _exists(folder, "fragments.md"):
        return out
    current: str | None = None
    lines: list[str] = []
    for line in _text(folder, "fragments.md").splitlines():
        m = re.match(r"^## (\w+)\s*$", line)
        if m:
            if current:
                out[current] = "\n".join(lines).strip("\n")
            current, lines = m.group(1), []
        elif current:
            lines.append(line)
    if current:
        out[current] = "\n".join(lines).strip("\n")
    # A fragment that starts with a blank line keeps it (e.g. "last_turn" is its own paragraph).
    return out


def fragment(name: str, profile: str = "full", **values: Any) -> str:
    text = _fragments(profile)[name]
    if name in ("last_turn",):
        text = "\n" + text
    return Template(text).substitute(**values) if values else Template(text).safe_substitute()


def load_variant(name: str) -> str:
    if name not in VARIANTS:
        raise ValueError(f"unknown prompt variant {name!r}; choose from {', '.join(VARIANTS)}")
    return _text("variants", f"{name}.md").strip("\n")


def _fill(name: str, profile: str = "full", **values: Any) -> str:
    return template(name, profile).substitute(**values)


def _and(xs: Sequence[int]) -> str:
    """``[3]`` → "3"; ``[3, 4]`` → "3 and 4"; ``[2, 3, 4]`` → "2, 3 and 4"."""
    xs = [str(x) for x in xs]
    return xs[0] if len(xs) == 1 else f"{', '.join(xs[:-1])} and {xs[-1]}"


def _plist(xs: Sequence[int]) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


class PromptBook:
    """Builds one seat's system prompt and user messages from its observations.

    Stateless apart from what the seat has already been shown this round, which the
    persona passes in (``seen``, ``joined``, ``notice``) so that :meth:`user_message` is
    a pure function: the engine records ``prompt(obs)`` before the call, and the call
    must send exactly that text.
    """

    def __init__(self, briefing: SeatBriefing, variant: str | None = None, profile: str = "full", *,
                 short_thinking: bool = False) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown prompt profile {profile!r}; choose from {', '.join(PROFILES)}")
        self.briefing = briefing
        self.variant = variant
        self.profile = profile
        self.short_thinking = short_thinking  # a small context window: "thinking" is optional and short
        self.seat = briefing.view.seat
        self.num_rounds = briefing.num_rounds

    def _frag(self, name: str, **values: Any) -> str:
        return fragment(name, self.profile, **values)

    def _fill(self, name: str, **values: Any) -> str:
        return _fill(name, self.profile, **values)

    # -- system ---------------------------------------------------------------------------
    def system_prompt(self) -> str:
        b = self.briefing
        v = b.view
        tools = "\n".join(self._frag(f"tool_{c}") for c in v.channels)
        text = self._fill(
            "system",
            agent_id=v.seat,
            num_agents=v.num_agents,
            all_agent_ids=", ".join(str(a) for a in range(v.num_agents)),
            num_slots=v.num_slots,
            max_slot=v.num_slots - 1,
            decision_retries=b.decision_retries,
            max_turns=b.max_turns_per_round,
            num_rounds=b.num_rounds,
            message_tools=tools,
            thinking_rule=self._frag("thinking_rule_short" if self.short_thinking else "thinking_rule"),
        )
        if self.variant:
            text += "\n\n" + load_variant(self.variant)
        return text

    # -- pieces ---------------------------------------------------------------------------
    def header(self, round_: int, phase: str, meeting_id: int) -> str:
        return self._frag("header", round_no=round_ + 1, num_rounds=self.num_rounds, phase=phase,
                        meeting_id=meeting_id, seat=self.seat)

    def _label_line(self, label: str | None) -> str:
        return self._frag("label_line", label=label) if label else ""

    def messages_block(self, msgs: Sequence[Delivered], header: str, empty: str | None) -> str:
        if not msgs:
            return (self._frag(empty) + "\n") if empty else ""
        lines = [self._frag(header)]
        for i, m in enumerate(msgs, 1):
            content = " ".join(m.content.split()) if "\n" not in m.content else m.content.strip()
            lines.append(self._frag("inbox_item", index=i, sender=m.sender, channel=self._frag(f"channel_{m.channel}"),
                                  meeting_id=m.meeting_id, content=content))
        return "\n".join(lines) + "\n"

    def _budget(self, obs: TurnObservation) -> str:
        return self._frag("budget", turn_no=obs.turn + 1, max_turns=obs.max_turns,
                        turns_left=max(0, obs.max_turns - obs.turn - 1))

    # -- user messages --------------------------------------------------------------------
    def user_message(self, obs, *, seen: int = 0, joined: bool = False, notice: str = "",
                     done_slot: int | None = None, facts: Any = None, intro: bool = False) -> str:
        """The user message for ``obs``.

        ``seen``: how many of this round's delivered messages the seat has already been
        shown; ``joined``: whether a non-participant has already had its first message of
        this round; ``notice``: a note about the previous reply (parse or connection
        failure), shown once, right under the header; ``done_slot``: the slot every
        participant has agreed to (the message then says the talk is done); ``facts``: this
        round's talk so far (``personas.llm.talk.TalkFacts``), for the turn's example;
        ``intro``: no message of this round is left in the seat's thread (its earlier turns
        were idle passes, ``LLMPersona.drops_idle_passes``), so this one introduces the round
        as its first turn's would.
        """
        if isinstance(obs, TurnObservation):
            text = self._turn(obs, joined=joined, done_slot=done_slot, facts=facts, intro=intro)
        elif isinstance(obs, DecisionObservation):
            text = self._decision(obs, seen=seen)
        elif isinstance(obs, VoluntaryObservation):
            text = self._voluntary(obs, seen=seen)
        else:
            raise TypeError(f"no prompt for observation {type(obs).__name__}")
        if notice:
            head, _, rest = text.partition("\n")
            text = f"{head}\n{notice}\n{rest}"
        return text

    def next_step(self, obs: TurnObservation, facts: Any = None, done_slot: int | None = None) -> str:
        """The line that ends a CHEAP_TALK message: the short action that fits this turn, built
        from what the talk has produced so far (``facts``) and why — never a fixed text a model
        could carry into another turn.  In order: answer an open cost request; agree to a slot
        proposed to me that I can hold (or propose one I can, if I cannot); propose the
        cheapest slot once every other participant sent costs; open the meeting with a cost
        request when I have its lowest id; else pass."""
        if done_slot is not None:
            return self._frag("next_step_done")
        why, action = self._step(obs, facts)
        thinking = "" if self.short_thinking else self._frag("thinking_example")
        return self._frag("next_step", why=why, thinking=thinking, action=action)

    def _step(self, obs: TurnObservation, facts: Any) -> tuple[str, str]:
        facts = facts if facts is not None else TalkFacts(obs.round)
        m = obs.meeting
        others = [p for p in m.participants if p != self.seat]
        costs = insertion_costs(obs.view.calendar)
        can = [s for s, c in enumerate(costs) if c is not None]
        request = facts.open_request()
        if request is not None:
            asker, slots = request
            return (self._frag("why_costs", asker=asker, slots=slots_phrase(slots) if slots else "every slot"),
                    self._frag("short_costs"))
        if not obs.is_participant or not can:
            return self._frag("why_wait"), self._frag("short_pass")
        mine = facts.agreed
        named = facts.proposed[-1] if facts.proposed else mine  # the slot I put forward last
        opener = bool(others) and self.seat == min(m.participants)
        if (opener and named is not None and facts.proposal is not None and facts.proposal[0] != self.seat
                and named not in facts.proposal[1]):
            # the opener named a slot a partner cannot take (it offered others): ask everyone's
            # costs, then propose the cheapest for all — IMAP's order, which its partners follow
            best = facts.cheapest(obs.view.calendar, others)
            if not facts.asked:
                return (self._frag("why_reopen", frm=facts.proposal[0], slot=named, others=_and(others)),
                        self._frag("short_ask"))
            if best is not None and best[1] != named:
                return self._frag("why_propose", slot=best[1]), self._frag("short_propose", slot=best[1])
        if facts.proposal is not None and facts.proposal[0] != self.seat:
            frm, slots = facts.proposal
            ok = [s for s in slots if 0 <= s < len(costs) and costs[s] is not None]
            if ok:
                slot = min(ok, key=lambda s: (costs[s], s))
                if mine != slot and named not in ok:
                    return self._frag("why_agree", frm=frm, slot=slot), self._frag("short_agree", slot=slot)
            elif mine is None and not facts.proposed:
                slot = min(can, key=lambda s: (costs[s], s))
                return (self._frag("why_counter", frm=frm, slots=slots_phrase(slots)),
                        self._frag("short_propose", slot=slot))
        best = facts.cheapest(obs.view.calendar, others)
        if best is not None and not facts.proposed and mine is None:
            return self._frag("why_propose", slot=best[1]), self._frag("short_propose", slot=best[1])
        if (others and self.seat == min(m.participants) and not facts.asked
                and not facts.proposed and facts.proposal is None and mine is None):
            return (self._frag("why_open", meeting_id=m.id, others=_and(others)),
                    self._frag("short_ask"))
        return self._frag("why_wait"), self._frag("short_pass")

    def _turn(self, obs: TurnObservation, *, joined: bool, done_slot: int | None = None, facts: Any = None,
              intro: bool = False) -> str:
        m = obs.meeting
        header = self.header(obs.round, "CHEAP_TALK", m.id)
        last = self._frag("last_turn") if obs.is_last_turn else ""
        inbox = self.messages_block(obs.inbox, "inbox_header", "inbox_empty")
        done = (self._frag("talk_done", slot=done_slot, meeting_id=m.id) + "\n") if done_slot is not None else ""
        if obs.is_round_start or intro:
            return self._fill("round_start", header=header, meeting_id=m.id, participants=_plist(m.participants),
                              speaker_order=_plist(m.speaker_order), duration=m.duration,
                              label_line=self._label_line(m.label), seat=self.seat, calendar=obs.view.render(),
                              penalty=obs.view.penalty, budget_line=self._budget(obs),
                              inbox=self.messages_block(obs.inbox, "inbox_header", None), last_turn=last,
                              next_step=self.next_step(obs, facts, done_slot))
        if not obs.is_participant and not joined:
            return self._fill("joined", header=header, meeting_id=m.id, participants=_plist(m.participants),
                              seat=self.seat, calendar=obs.view.render(), budget_line=self._budget(obs), inbox=inbox,
                              last_turn=last, done_line=done, next_step=self.next_step(obs, facts, done_slot))
        return self._fill("turn", header=header, budget_line=self._budget(obs), inbox=inbox, last_turn=last,
                          done_line=done, next_step=self.next_step(obs, facts, done_slot))

    def _retry(self, obs, phase: str, what: str, more: str = "") -> str:
        return self._fill("retry", header=self.header(obs.round, phase, obs.meeting.id), attempt=obs.attempt,
                          max_attempts=obs.max_attempts, conflict=obs.rejection or "(no detail)", what=what,
                          more=more)

    #: ``LLMSettings.decision``: ``slot`` (name the slot; the seat moves what must move) or
    #: ``batch`` (the model writes its own moves).  The persona sets its seat's setting.
    decision_mode = "slot"

    def _decision(self, obs: DecisionObservation, *, seen: int, own: Sequence[tuple[int, Any]] = ()) -> str:
        from .decide import reach_words, talk_facts, talk_lines

        m = obs.meeting
        facts = talk_facts(obs, own)
        if obs.attempt > 0 and obs.rejection:  # (a call the endpoint lost used an attempt, refused nothing)
            if self.decision_mode == "slot":  # the rule's words, then the slots the seat can take
                return self._retry(obs, "DECISION", self._fill("what_slot", meeting_id=m.id),
                                   more=reach_words(obs.view.calendar) + self._decision_example(obs, facts) + "\n")
            return self._retry(obs, "DECISION", self._frag("what_decision", meeting_id=m.id))
        unread = self.messages_block(obs.round_messages[seen:], "unread_header", None)
        lines = talk_lines(facts, self.seat, m.id)
        if lines:
            talk = self._fill("talk", meeting_id=m.id, lines="\n".join(f"- {x}" for x in lines)) + "\n"
        else:
            talk = self._fill("talk_none", meeting_id=m.id) + "\n"
        return self._fill("decision", header=self.header(obs.round, "DECISION", m.id), meeting_id=m.id,
                          participants=_plist(m.participants), label_line=self._label_line(m.label),
                          unread=unread, talk=talk, calendar=obs.view.render(),
                          instruction=self._fill(f"decide_{self.decision_mode}", meeting_id=m.id,
                                                 reach=reach_words(obs.view.calendar),
                                                 example=self._decision_example(obs, facts)))

    def _decision_example(self, obs: DecisionObservation, facts: Any) -> str:
        """The example reply of a DECISION message by slot, built from this round's talk: the
        slot every participant accepted or the talk settled on, else one the talk was about, when
        the seat can take it (:func:`personas.llm.decide.decision_example_slot`); else none."""
        from .decide import decision_example_slot

        found = decision_example_slot(facts, obs.view.calendar)
        if found is None:
            return ""
        slot, why = found
        thinking = "" if self.short_thinking else self._frag("thinking_example")
        action = json.dumps({"type": "schedule", "meeting_id": obs.meeting.id, "slot": slot})
        return "\n" + self._frag(f"decide_example_{why}", slot=slot, thinking=thinking, action=action)

    def decision_message(self, obs: DecisionObservation, *, seen: int = 0, notice: str = "",
                         own: Sequence[tuple[int, Any]] = ()) -> str:
        """The DECISION user message, its talk facts counting the seat's own messages of the
        round (``own``: ``(turn, Message)``, which ``obs.round_messages`` does not hold)."""
        text = self._decision(obs, seen=seen, own=own)
        if notice:
            head, _, rest = text.partition("\n")
            text = f"{head}\n{notice}\n{rest}"
        return text

    def _voluntary(self, obs: VoluntaryObservation, *, seen: int) -> str:
        m = obs.meeting
        if obs.attempt > 0 and obs.rejection:
            return self._retry(obs, "VOLUNTARY", self._frag("what_voluntary"))
        unread = self.messages_block(obs.round_messages[seen:], "unread_header", None)
        return self._fill("voluntary", header=self.header(obs.round, "VOLUNTARY", m.id), meeting_id=m.id,
                              participants=_plist(m.participants), unread=unread, seat=self.seat,
                              calendar=obs.view.render())

    def reflection(self, obs) -> str:
        targets = list(obs.targets)
        example = json.dumps({str(t): [0] * obs.view.num_slots for t in targets[:2]})
        if len(targets) > 2:
            example = example[:-1] + ", ...}"
        return self._fill("reflection",
                     header=self._frag("reflection_header", round_no=obs.round + 1, meeting_id=obs.meeting.id,
                                     seat=self.seat),
                     round_no=obs.round + 1, targets=", ".join(f"Agent {t}" for t in targets),
                     max_slot=obs.view.num_slots - 1, num_slots=obs.view.num_slots, example=example)
