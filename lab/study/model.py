"""The study file: a TOML design validated by pydantic (no Textual, no store).

:func:`load_study` reads a file and returns a :class:`Study`; every mistake becomes a
:class:`StudyFileError` whose message names the file, the line and the fix, e.g.::

    study.toml line 31: conditions[1].seat: 7 is not a seat of a 5-seat table (use 0-4)

The sections (``calbench study init`` writes an annotated example, ``lab.study.example``):

``[study]``          name, seed, completion-code prefix, simulated-human protocol
``[[conditions]]``   the treatments: partners per seat, the participant's seat, channels, turns, LLM endpoint
``[tasks]``          the pool (a task reference), games per condition, an optional practice game
``[assignment]``     latin (counterbalanced) | random (seeded) | fixed; the seat positions rotated
``[timing]``         seconds per talk turn and per decision, what a decision timeout does
``[consent]`` ``[instructions]``  Markdown inline (``text``) or from a file (``file``)
``[[quiz]]``         comprehension questions that must be answered right before play
``[[questionnaires]]`` before / after each game / after the study: likert, choice, text items
``[beliefs]``        the belief grid: after which rounds, about which seats
``[payment]``        show-up fee, bonus per meeting scheduled or per cost unit saved, cap
``[pool]``           an online pool: the id parameter in the browser link, the return link, the public
                     link's cap and ids, a time limit, a code (and link) per outcome
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from engine import protocols
from engine.channels import CHANNEL_ALIASES, CHANNEL_ORDER, CHANNEL_SHORT
from engine.inputs import MAX_ID_CHARS
from personas.person_like import PERSON_LIKE
from personas.spec import SCRIPTED_NAMES

__all__ = ["Study", "Condition", "StudyFileError", "load_study", "parse_study"]

#: The scripted partners a condition may name (every protocol's seats and the passive seat).
SCRIPTED = SCRIPTED_NAMES
#: The channel words a study file takes: the short names of ``engine.channels``.
CHANNELS = tuple(CHANNEL_SHORT[c] for c in CHANNEL_ORDER)


def _duplicates(ids: list[str]) -> list[str]:
    """The ids that occur more than once, in the order they first repeat."""
    seen: set[str] = set()
    out: list[str] = []
    for i in ids:
        if i in seen and i not in out:
            out.append(i)
        seen.add(i)
    return out


class StudyFileError(ValueError):
    """A study file that cannot be used; the message is one line (file, line, what to do)."""


#: ids (study, condition, questionnaire and item names) are capped like every id (issue 24 item 11)
_MAX_ID = MAX_ID_CHARS


#: The largest seed a study file may give (integers past it are refused, not wrapped; issue 35).
MAX_SEED = 2 ** 53
#: The longest time limit a study file may give, in seconds (a day; 1e308 was accepted).
MAX_SECONDS = 86_400.0


class _Model(BaseModel):
    # strict: a value of the wrong type is refused, not coerced ("90" for 90, true for 1, "6" for 6);
    # no NaN or infinite number (issue 35: talk_seconds = inf was accepted)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Text(_Model):
    """Markdown given inline (``text``) or in a file (``file``, relative to the study file)."""

    text: str | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _one(self) -> "Text":
        if (self.text is None) == (self.file is None):
            raise ValueError("give exactly one of text = \"...\" or file = \"consent.md\"")
        return self

    def read(self, base: Path) -> str:
        if self.text is not None:
            return self.text
        from engine.inputs import read_text

        return read_text(base / str(self.file), "the file", error=StudyFileError)


class LLMEndpoint(_Model):
    """Endpoint settings for the ``llm:`` seats of a condition (the key stays in the environment)."""

    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = Field(None, ge=0, le=2)
    timeout: float = Field(60.0, gt=0, le=MAX_SECONDS)
    retries: int = Field(2, ge=0, le=100)
    max_calls_per_round: int | None = Field(None, ge=1, description="CHEAP_TALK calls per round of each LLM seat; "
                                                                    "past it the seat passes without a request")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        from urllib.parse import urlsplit

        if v is not None:
            parts = urlsplit(v.strip())
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{v!r} is not an http(s) URL; write e.g. \"http://127.0.0.1:8000/v1\"")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, v: str) -> str:
        if not v.replace("_", "").isalnum():
            raise ValueError("must be the NAME of an environment variable holding the key, never the key itself")
        return v


class Condition(_Model):
    """One treatment: who sits at the table besides the participant, and the rules of talk."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=_MAX_ID)
    description: str = ""
    partners: list[str] | str = Field(default_factory=protocols.default_seat,
                                      description="one persona for every other seat, or one per seat")
    seat: int = Field(0, ge=0, description="the participant's seat when assignment does not rotate seats")
    channels: list[str] = ["dm"]
    max_turns: int = Field(6, ge=1, le=50)
    cost: Literal["task", "uniform", "varied"] = Field(
        "task", description="the tasks' own costs, or the same seed:N scenarios with uniform / varied costs")
    llm: LLMEndpoint = LLMEndpoint()
    reveal_partners: bool = Field(False, description="show the partners' protocol or model to the participant "
                                                     "(default: blinded, every partner is 'Agent N')")
    phrasebook: Literal["off", "scripted", "all"] = Field(
        "off", description="blinded wording (engine/phrasebook.py): 'scripted' — the scripted partners' messages to "
                           "the participant, and the participant's quick actions, in a person's varied words; 'all' — "
                           "the LLM partners' too (what the reader can tell in them; the rest is withheld)")
    fidelity: Literal["ours", "paper"] = Field(
        "ours", description="how DSM and SD-MAP partners play: ours, or paper (the authors' code; "
                            "docs/protocols-dsm.md, docs/protocols.md)")
    renamed_from: list[str] = Field(
        [], description="earlier names of this condition: games recorded under them count as this condition")

    @field_validator("partners")
    @classmethod
    def _partners(cls, v: list[str] | str) -> list[str] | str:
        for name in [v] if isinstance(v, str) else v:
            n = name.strip()
            if n == "human":
                raise ValueError("'human' is the participant's seat; partners are scripted or llm:MODEL seats")
            if not (n in SCRIPTED or (n.startswith("llm:") and len(n) > 4)):
                raise ValueError(f"unknown persona {n!r}; use {', '.join(SCRIPTED)} or llm:MODEL[+variant]")
        return v

    @field_validator("channels")
    @classmethod
    def _channels(cls, v: list[str]) -> list[str]:
        bad = [c for c in v if c not in CHANNELS]
        if bad or not v:
            raise ValueError(f"channels must be a non-empty list of {', '.join(CHANNELS)} (got {v})")
        return v

    def partner_names(self, num_agents: int, seat: int) -> list[str]:
        """One persona name per seat with ``human`` at ``seat``."""
        if isinstance(self.partners, str):
            others = [self.partners.strip()] * (num_agents - 1)
        else:
            others = [p.strip() for p in self.partners]
            if len(others) == num_agents:  # one per seat: the participant's entry is replaced
                others = others[:seat] + others[seat + 1:]
            if len(others) != num_agents - 1:
                raise ValueError(f"condition {self.name!r} names {len(self.partners)} partners for a "
                                 f"{num_agents}-seat table; give one name, {num_agents - 1} or {num_agents}")
        return others[:seat] + ["human"] + others[seat:]

    @property
    def uses_llm(self) -> bool:
        names = [self.partners] if isinstance(self.partners, str) else self.partners
        return any(n.strip().startswith("llm:") for n in names)

    def channel_names(self) -> tuple[str, ...]:
        return tuple(CHANNEL_ALIASES[c] for c in self.channels)  # in the file's order


class Tasks(_Model):
    pool: str | list[str] = Field(description="task references: canonical:1-12, tasks.jsonl, or a list "
                                              "such as [\"seed:100\", \"seed:101\"]")
    games_per_condition: int = Field(1, ge=1, le=20)
    practice: str | None = Field(None, description="a task reference naming one task, played first and marked practice")

    @field_validator("pool")
    @classmethod
    def _distinct(cls, v: str | list[str]) -> str | list[str]:
        dup = _duplicates([r.strip() for r in v]) if isinstance(v, list) else []
        if dup:
            raise ValueError(f"lists {', '.join(map(repr, dup))} more than once; name each task once (a participant "
                             "would play the same task twice)")
        return v


class Assignment(_Model):
    method: Literal["latin", "random", "fixed"] = "latin"
    seed: int = Field(0, ge=0, le=MAX_SEED)
    seats: list[int] | None = Field(None, description="seat positions rotated over participants (default: each "
                                                      "condition's seat)")


class Timing(_Model):
    talk_seconds: float | None = Field(90, gt=0, le=MAX_SECONDS, description="per talk turn; none = no limit")
    decision_seconds: float | None = Field(120, gt=0, le=MAX_SECONDS, description="per decision (and voluntary move)")
    on_decision_timeout: Literal["submit", "no_move"] = "submit"


class QuizQuestion(_Model):
    question: str
    choices: list[str] = Field(min_length=2)
    answer: int = Field(ge=0, description="index of the right choice (0 = the first)")
    explanation: str
    max_attempts: int | None = Field(None, ge=1, description="tries before the participant is screened out "
                                                             "(default: as many as needed)")

    @model_validator(mode="after")
    def _answer_in_range(self) -> "QuizQuestion":
        if not self.question.strip():
            raise ValueError("the question is empty; write what the participant is asked")
        if not all(c.strip() for c in self.choices):
            raise ValueError("a choice is empty; write every choice")
        if self.answer >= len(self.choices):
            raise ValueError(f"answer = {self.answer} but there are only {len(self.choices)} choices "
                             f"(0-{len(self.choices) - 1})")
        return self


class Item(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=_MAX_ID)
    text: str
    type: Literal["likert", "choice", "text"]
    points: int = Field(7, ge=2, le=11, description="likert: number of points")
    low: str = "strongly disagree"
    high: str = "strongly agree"
    choices: list[str] = []
    optional: bool = False
    answer: int | None = Field(None, ge=0, description="an attention check: the index of the right choice "
                                                       "(choice items) or the right point (likert, 1 = the first)")

    @model_validator(mode="after")
    def _choices(self) -> "Item":
        if self.type == "choice" and len(self.choices) < 2:
            raise ValueError(f"item {self.id!r} is a choice item: give choices = [\"...\", \"...\"]")
        if self.answer is not None:
            if self.type == "text":
                raise ValueError(f"item {self.id!r}: an attention check (answer = ...) must be a choice or "
                                 "likert item")
            if self.type == "choice" and self.answer >= len(self.choices):
                raise ValueError(f"item {self.id!r}: answer = {self.answer} but there are only "
                                 f"{len(self.choices)} choices (0-{len(self.choices) - 1})")
            if self.type == "likert" and not 1 <= self.answer <= self.points:
                raise ValueError(f"item {self.id!r}: answer = {self.answer} is not a point of the scale "
                                 f"(1-{self.points})")
        return self

    @property
    def is_check(self) -> bool:
        return self.answer is not None

    def correct(self, response: Any) -> bool | None:
        """Whether ``response`` (as stored: a choice's text or a likert point) passes the check."""
        if self.answer is None:
            return None
        if self.type == "choice":
            return response == self.choices[self.answer]
        try:
            return int(response) == self.answer
        except (TypeError, ValueError):
            return False


class Questionnaire(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=_MAX_ID)
    when: Literal["before", "after_game", "after_study"]
    title: str = ""
    items: list[Item] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_items(self) -> "Questionnaire":
        # answers are keyed by item id: two items with one id would overwrite each other's answers
        dup = _duplicates([it.id for it in self.items])
        if dup:
            raise ValueError(f"questionnaire {self.id!r} has more than one item with id {', '.join(map(repr, dup))}; "
                             "give every item its own id")
        return self


class Beliefs(_Model):
    enabled: bool = True
    rounds: list[int] | Literal["all", "last"] = Field(
        "last", description="after which rounds, counted from 1 as on every screen; 'last' or 'all'")
    targets: list[int] | Literal["meeting", "all"] = "meeting"
    practice: bool = False
    watched_rounds: bool = Field(False, description="also ask after rounds whose meeting the participant was not "
                                                    "in (the grid says so); by default only rounds they took part in")
    _zero_based: list[int] | None = PrivateAttr(None)  # the rounds as written in the old 0-based form

    @model_validator(mode="after")
    def _old_form(self) -> "Beliefs":
        # Study files written before rounds counted from 1 listed them from 0.  A list with a
        # 0 in it can only be that form: it is read as such (each round + 1) and the loader
        # warns with the line to write instead (parse_study).  Any other list counts from 1.
        if isinstance(self.rounds, list) and 0 in self.rounds and all(r >= 0 for r in self.rounds):
            self._zero_based = list(self.rounds)
            object.__setattr__(self, "rounds", [r + 1 for r in self.rounds])
        return self


class Payment(_Model):
    """What a participant earns: a show-up fee plus a bonus, capped (currency as you write it)."""

    currency: str = Field("£", max_length=8)
    show_up: float = Field(0.0, ge=0, description="paid to everyone who completes the study")
    per_meeting: float = Field(0.0, ge=0, description="bonus per meeting of the participant's scheduled (practice "
                                                      "excluded)")
    per_cost: float = Field(0.0, ge=0, description="taken off the bonus per unit of cost the participant's own "
                                                   "moves incurred (the bonus never goes below 0)")
    cap: float | None = Field(None, ge=0, description="the most a bonus can reach (none = no cap)")


#: How a pool participant's session can end; each may have its own code and return link ([pool.OUTCOME]).
POOL_OUTCOMES = ("completed", "declined", "screened_out", "timed_out")


def _return_url(v: str | None) -> str | None:
    if v is not None and not v.startswith(("https://", "http://")):
        raise ValueError("return_url must start with https:// (or http://)")
    return v


class PoolOutcome(_Model):
    """What the pool is told when a session ends one way ([pool.completed], [pool.declined],
    [pool.screened_out], [pool.timed_out]): the code the pool expects for it and, if it differs
    from the pool's ``return_url``, the link back."""

    code: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$",
                             description="the pool's code for this outcome (completed: default the "
                                         "participant's own completion code)")
    return_url: str | None = Field(None, description="the link back for this outcome (default: [pool] return_url)")

    @field_validator("return_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return _return_url(v)


class Pool(_Model):
    """An online participant pool (Prolific, MTurk, SONA ...)."""

    id_param: str = Field("participant", pattern=r"^[A-Za-z0-9_]+$",
                          description="the query parameter of the browser link that carries the pool's id")
    return_url: str | None = Field(None, description="shown on the completion screen; {code} becomes the "
                                                     "completion code, {pool_id} the pool's id")
    max_participants: int | None = Field(None, ge=1, le=100000,
                                         description="turns on the public study link (calbench serve --study): at "
                                                     "most this many pool participants who have not left")
    participant_prefix: str = Field("W", pattern=r"^[A-Za-z][A-Za-z0-9]{0,7}$",
                                    description="ids of participants admitted by the public link: W001, W002, ...")
    time_limit_minutes: float | None = Field(None, gt=0, le=10080,
                                             description="a session older than this ends as timed_out at its "
                                                         "next step")
    completed: PoolOutcome | None = None
    declined: PoolOutcome | None = None
    screened_out: PoolOutcome | None = None
    timed_out: PoolOutcome | None = None

    @field_validator("return_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return _return_url(v)

    def code_for(self, outcome: str, own_code: str | None = None) -> str | None:
        """The code the pool is given for ``outcome``: the outcome's ``code``; for ``completed``
        without one, ``own_code`` (the participant's completion code); None when there is none."""
        o = getattr(self, outcome, None) if outcome in POOL_OUTCOMES else None
        if o is not None and o.code:
            return o.code
        return own_code if outcome == "completed" else None

    def link(self, code: str | None, pool_id: str | None, outcome: str = "completed") -> str | None:
        """The return link for ``outcome`` with ``{code}`` and ``{pool_id}`` filled in; None without a
        return URL, and for an outcome other than completed without a code or URL of its own (the
        pool then has nothing to be told)."""
        o = getattr(self, outcome, None) if outcome in POOL_OUTCOMES else None
        url = (o.return_url if o is not None and o.return_url else None) or self.return_url
        if not url or (outcome != "completed" and (o is None or not (o.code or o.return_url))):
            return None
        if "{code}" in url and not code:
            return None
        return url.replace("{code}", code or "").replace("{pool_id}", pool_id or "")

    def ending(self, outcome: str, own_code: str | None, pool_id: str | None) -> tuple[str | None, str | None]:
        """``(code, return link)`` shown and exported for a session that ended as ``outcome``
        (``(None, None)`` for one that has not ended: active)."""
        if outcome not in POOL_OUTCOMES:
            return None, None
        code = self.code_for(outcome, own_code)
        return code, self.link(code, pool_id, outcome)


class StudyMeta(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=_MAX_ID)
    title: str = ""
    seed: int = Field(0, ge=0, le=MAX_SEED)
    code_prefix: str = Field("CB", pattern=r"^[A-Z0-9]{0,8}$")
    #: how simulated participants (``study check --dry-run``) play their seat: like a person
    #: (``person-like``, personas/person_like.py: proposes, types offers, accepts, misses a turn)
    #: or as a reference protocol's seat (engine.protocols, no variant); docs/study-guide.md
    #: says why a person is the default
    simulated_protocol: str = Field(PERSON_LIKE, description="person-like, or a reference protocol's seat")
    minutes_per_game: float = Field(8.0, gt=0, description="for the time estimate of study check")
    participant_pattern: str = Field(r"[A-Za-z0-9]+", description="participant ids must match it in full")

    @field_validator("simulated_protocol")
    @classmethod
    def _simulated(cls, v: str) -> str:
        names = (PERSON_LIKE, *protocols.seat_names(variants=False))
        if v not in names:
            raise ValueError(f"Input should be {', '.join(repr(n) for n in names[:-1])} or {names[-1]!r}")
        return v

    @field_validator("participant_pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return v


class Study(_Model):
    study: StudyMeta
    conditions: list[Condition] = Field(min_length=1)
    tasks: Tasks
    assignment: Assignment = Assignment()
    timing: Timing = Timing()
    consent: Text
    instructions: Text
    quiz: list[QuizQuestion] = []
    questionnaires: list[Questionnaire] = []
    beliefs: Beliefs = Beliefs()
    payment: Payment | None = None
    pool: Pool = Pool()
    _base: Path | None = PrivateAttr(None)  # the study file's folder: task files are relative to it
    _warnings: list[str] = PrivateAttr(default_factory=list)  # one line each: file, line, what to do

    @property
    def warnings(self) -> list[str]:
        """What the loader accepted but the researcher should fix (e.g. the old 0-based rounds)."""
        return list(self._warnings)

    @model_validator(mode="after")
    def _unique(self) -> "Study":
        names = [c.name for c in self.conditions]
        if len(set(names)) != len(names):
            raise ValueError(f"condition names must differ (got {names})")
        old = [o for c in self.conditions for o in c.renamed_from]
        if len(set(old)) != len(old) or set(old) & set(names):
            raise ValueError(f"renamed_from names must differ from each other and from the conditions' names "
                             f"(got {old})")
        ids = [q.id for q in self.questionnaires]
        if len(set(ids)) != len(ids):
            raise ValueError(f"questionnaire ids must differ (got {ids})")
        return self

    # -- derived -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.study.name

    def condition(self, name: str) -> Condition:
        """The condition called ``name`` now, or earlier (``renamed_from``)."""
        for c in self.conditions:
            if c.name == name:
                return c
        for c in self.conditions:
            if name in c.renamed_from:
                return c
        raise KeyError(name)

    def current_name(self, recorded: str) -> str | None:
        """The name a condition recorded as ``recorded`` has in this file; None if it names none."""
        try:
            return self.condition(recorded).name
        except KeyError:
            return None

    @property
    def games_per_participant(self) -> int:
        return len(self.conditions) * self.tasks.games_per_condition

    def questionnaires_at(self, when: str) -> list[Questionnaire]:
        return [q for q in self.questionnaires if q.when == when]


# -- loading, with the line and the fix ----------------------------------------------------------

_FIX = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
    "literal_error": "use one of the values listed",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "float_parsing": "write a number",
    "string_type": "write it in quotes",
    "string_pattern_mismatch": "use letters, digits, '-', '_' or '.' only",
    "greater_than_equal": "use a larger value",
    "greater_than": "use a larger value",
    "less_than_equal": "use a smaller value",
    "too_short": "add entries",
    "list_type": "write a list, e.g. [\"a\", \"b\"]",
    "bool_type": "write true or false",
}


def _line_of(text: str, loc: tuple) -> int | None:
    """Best line for an error at ``loc`` (('conditions', 1, 'seat') ...): the key under the right table."""
    lines = text.splitlines()
    # find the table header: [name] or the k-th [[name]]
    start, end = 0, len(lines)
    parts = list(loc)
    header_line = None
    if parts and isinstance(parts[0], str):
        top = parts[0]
        idx = parts[1] if len(parts) > 1 and isinstance(parts[1], int) else None
        seen = -1
        for i, ln in enumerate(lines):
            s = ln.strip()
            if idx is not None and s == f"[[{top}]]":
                seen += 1
                if seen == idx:
                    header_line = i
                    break
            elif idx is None and (s == f"[{top}]" or s.startswith(f"[{top}.")):
                header_line = i
                break
        if header_line is not None:
            start = header_line + 1
            for j in range(start, len(lines)):
                if re.match(r"^\s*\[\[?[A-Za-z]", lines[j]) and not lines[j].strip().startswith(f"[{top}.") \
                        and not lines[j].strip().startswith(f"[[{top}."):
                    end = j
                    break
        keys = [p for p in parts[1:] if isinstance(p, str)]
        if keys:
            for j in range(start, end):
                if re.match(rf"^\s*{re.escape(keys[-1])}\s*=", lines[j]):
                    return j + 1
        if header_line is not None:
            return header_line + 1
        for j, ln in enumerate(lines):
            if re.match(rf"^\s*{re.escape(top)}\s*=", ln):
                return j + 1
    return None


def _where(loc: tuple) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse_study(text: str, *, source: str = "study.toml", base: Path | None = None) -> Study:
    """Validate study TOML text; raises :class:`StudyFileError` with the line and the fix."""
    from engine.inputs import loads_toml

    try:
        data = loads_toml(text, source, error=StudyFileError)
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError(f"{source}: not valid TOML: {exc} (check quotes, brackets and '=' signs)") from None
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        line = _line_of(text, loc)
        msg = err["msg"].removeprefix("Value error, ")
        fix = _FIX.get(err["type"])
        more = f" ({len(exc.errors()) - 1} more problem(s) after this one)" if len(exc.errors()) > 1 else ""
        at = f" line {line}" if line else ""
        raise StudyFileError(f"{source}{at}: {_where(loc) or 'the file'}: {msg}"
                             f"{' — ' + fix if fix else ''}{more}") from None
    study._base = base
    _check_semantics(study, text, source, base)
    return study


def _check_semantics(study: Study, text: str, source: str, base: Path | None) -> None:
    """What pydantic cannot see alone: tasks resolve, seats fit the table, files exist."""
    from engine.model import TaskError
    from engine.taskref import TaskRefError, resolve_tasks

    def fail(loc: tuple, msg: str) -> None:
        line = _line_of(text, loc)
        raise StudyFileError(f"{source}{f' line {line}' if line else ''}: {_where(loc)}: {msg}")

    try:
        pool = pool_tasks(study)
    except (TaskRefError, TaskError, OSError) as exc:
        fail(("tasks", "pool"), f"{exc}")
    need = len(study.conditions) * study.tasks.games_per_condition
    if len(pool) < need:
        fail(("tasks", "pool"), f"names {len(pool)} tasks but {len(study.conditions)} conditions × "
                                f"{study.tasks.games_per_condition} games need {need}; name more tasks")
    sizes = {t.num_agents for t in pool}
    if study.tasks.practice:
        try:
            prac = resolve_tasks(_relative(study, study.tasks.practice))
        except (TaskRefError, TaskError, OSError) as exc:
            fail(("tasks", "practice"), f"{exc}")
        if len(prac) != 1:
            fail(("tasks", "practice"), f"names {len(prac)} tasks; name exactly one (e.g. seed:99)")
        sizes.add(prac[0].num_agents)
    n = min(sizes)
    refs = ([study.tasks.pool] if isinstance(study.tasks.pool, str) else list(study.tasks.pool)) + \
        ([study.tasks.practice] if study.tasks.practice else [])
    for i, c in enumerate(study.conditions):
        if c.cost != "task" and not all(r.strip().startswith("seed:") for r in refs):
            fail(("conditions", i, "cost"), f"cost = {c.cost!r} re-costs seed:N scenarios only; list the pool as "
                                            "seed:N references, or use cost = \"task\" and tasks of that cost")
    seen: dict[str, int] = {}
    for i, q in enumerate(study.quiz):  # answers are keyed by question number; one question twice is a slip
        key = " ".join(q.question.split()).lower()
        if key in seen:
            fail(("quiz", i), f"asks {q.question!r} again (quiz question {seen[key] + 1}); give each question once")
        seen[key] = i
    seats = study.assignment.seats
    for i, c in enumerate(study.conditions):
        if c.seat >= n:
            fail(("conditions", i, "seat"), f"{c.seat} is not a seat of a {n}-seat table (use 0-{n - 1})")
        try:
            c.partner_names(n, c.seat)
        except ValueError as exc:
            fail(("conditions", i, "partners"), str(exc))
    for s in seats or ():
        if not 0 <= s < n:
            fail(("assignment", "seats"), f"{s} is not a seat of a {n}-seat table (use 0-{n - 1})")
    if seats is not None and (not seats or len(set(seats)) != len(seats)):
        fail(("assignment", "seats"), "give distinct seat numbers, e.g. seats = [0, 2]")
    if isinstance(study.beliefs.targets, list):
        for t in study.beliefs.targets:
            if not 0 <= t < n:
                fail(("beliefs", "targets"), f"{t} is not a seat (use 0-{n - 1}, 'meeting' or 'all')")
    _check_belief_rounds(study, text, source, pool, fail)
    if base is not None:
        for key in ("consent", "instructions"):
            t: Text = getattr(study, key)
            if t.file and not (base / t.file).is_file():
                fail((key, "file"), f"{t.file!r} does not exist next to the study file; create it or use text = \"...\"")


def _check_belief_rounds(study: Study, text: str, source: str, pool: list[Any], fail) -> None:
    """``[beliefs] rounds``: counted from 1 (as every screen counts them) and within the tasks."""
    b = study.beliefs
    if not isinstance(b.rounds, list):
        return
    loc = ("beliefs", "rounds")
    if b._zero_based is not None:
        line = _line_of(text, loc)
        study._warnings.append(
            f"{source}{f' line {line}' if line else ''}: beliefs.rounds = {b._zero_based} counts rounds from 0 "
            f"(the old form); it is read as rounds {', '.join(map(str, b.rounds))} — write "
            f"rounds = {b.rounds} (rounds count from 1, as on every screen)")
    if not b.enabled:
        return
    if not b.rounds:
        fail(loc, "[] asks no belief grid at all; list rounds from 1 (e.g. [1, 3]), write 'last' or 'all', "
                  "or set enabled = false")
    tasks = list(pool)
    if study.tasks.practice and b.practice:
        try:
            tasks.append(practice_task(study))
        except Exception:  # checked (with its own message) above
            pass
    n = min((len(t.meetings) for t in tasks if t is not None), default=0)
    if not n:
        return
    bad = [r for r in b.rounds if not 1 <= r <= n]
    if bad:
        shortest = "the tasks have" if len({len(t.meetings) for t in tasks if t is not None}) == 1 \
            else "the shortest task has"
        fail(loc, f"round {bad[0]} is not a round of the tasks: {shortest} {n} rounds, so no grid would ever "
                  f"be shown there; count rounds from 1 (use 1-{n}, 'last' or 'all')")


def load_study(path: str | Path) -> Study:
    """Read and validate a study file (see :func:`parse_study`)."""
    from engine.inputs import read_text

    p = Path(path)
    try:
        text = read_text(p, "study file", error=StudyFileError)
    except FileNotFoundError:
        raise StudyFileError(f"{p}: no such study file; write an example with 'calbench study init {p}'") from None
    except OSError as exc:
        raise StudyFileError(f"{p}: cannot read it: {exc.strerror}") from None
    return parse_study(text, source=str(p), base=p.parent)


def pool_tasks(study: Study) -> list[Any]:
    """The pool's tasks, in order, labels hydrated."""
    from engine.taskref import hydrate_labels, resolve_tasks

    refs = [study.tasks.pool] if isinstance(study.tasks.pool, str) else study.tasks.pool
    return [hydrate_labels(t) for ref in refs for t in resolve_tasks(_relative(study, ref))]


def condition_task(study: Study, condition: Condition, task: Any) -> Any:
    """The task as a condition plays it: unchanged for ``cost = "task"``, else the same seed:N
    scenario generated with that cost setting (same calendars and meetings, other costs)."""
    if condition.cost == "task" or task.cost_mode == condition.cost:
        return task
    from engine.generate import generate_scenario
    from engine.taskref import hydrate_labels

    return hydrate_labels(generate_scenario(int(task.seed), cost_mode=condition.cost))


def _relative(study: Study, ref: str) -> str:
    """A task file named relative to the study file (seed:/canonical references unchanged)."""
    base = study._base
    if base is None or ref.startswith(("seed:", "canonical")) or Path(ref.split(":")[0]).is_absolute():
        return ref
    return str(base / ref)


def practice_task(study: Study) -> Any | None:
    from engine.taskref import resolve_tasks

    from engine.taskref import hydrate_labels

    return hydrate_labels(resolve_tasks(_relative(study, study.tasks.practice))[0]) if study.tasks.practice else None
