"""DSM — Distributed Score-based Multi-round scheduling (SPEC §7, paper App. D.3).

Two presets of one protocol (paper Table 9): ``DSMPersona("welfare")`` (model
``dsm-welfare``) and ``DSMPersona("private")`` (model ``dsm-private``).  The protocol, as
this module plays it (docs/protocols-dsm.md has the full write-up):

* **Roles.** The *initiator* of a meeting is its lowest-id participant; the other
  participants are *responders*.  Participants of a prior meeting that a displacement
  plan would move (see below) become *additional responders* for that plan.
* **Offer.** The initiator ranks every *plan* it can carry out locally: first its plain
  slots (free, or a movable errand it can re-home) by its own satisfaction level, then
  — for slots held by a prior meeting — displacement plans that move that meeting
  elsewhere (up to ``displacement_targets`` per slot, chains up to ``cascade_depth``
  moves).  It picks the offer size ``L`` that maximises ``U(L)`` (:func:`offer_utility`)
  and sends the next ``L`` untried plans as one ``proposals`` DM to every responder; the
  other participants of a bumped meeting receive only the plans that move it.
* **Scores.** Every recipient answers with a ``scores`` DM: a satisfaction level
  ``s ∈ {0..D-1}``, ``D = 12``, per plan, computed on its own calendar
  (:func:`satisfaction`: 0 impossible, 11 free, one level lower per doubling of cost).
* **Decision.** When every recipient has answered (or one sweep has passed), the
  initiator keeps the plans that it and every scorer rated above zero and announces, in
  a ``decision`` DM, the one of least total cost read back from the scores
  (:func:`band_cost`; ties: smallest worst dissatisfaction, then lowest slot).  If none
  is jointly feasible it offers the next untried batch (a *sub-round*): DSM-Welfare
  searches exhaustively; DSM-Private goes on only while ``max U(L) > -β``, which with
  θ = 10 practically never holds, so it stops after one offer.  With nothing left it
  sends ``fail`` and every participant abstains, leaving no ghost meeting behind.
  Bumped agents outside the meeting move their copy in VOLUNTARY; participants apply
  the agreed moves in their DECISION batch.
* **Bookkeeping.** Each non-zero score costs its sender ``C(s) = D-s-1`` points, paid
  into the initiator's budget (initial 100) when the negotiation closes; the initiator
  pays every responder whose score at the chosen plan counted the flexibility-adjusted
  reward ``R = (D-1-s*) + max(0, min(A, L) - 1)`` (``s*`` its score there, ``A`` how many
  plans it scored above zero in the deciding sub-round, ``L`` how many it was offered).
  The budget is kept and reported (``persona.budget``, ``persona.ledger``, the payloads);
  it never changes a choice.

Every message carries a typed ``payload`` (``{"protocol": "dsm", "kind": ..., ...}``) and
readable English ``content``; free text and other protocols' messages are read leniently
and answered politely, so mixed tables never hang.  A ``decision`` with no ``proposals``
before it and no plan in it (a person's quick key ``p``) is a proposal: answered with an
``answer`` that names at most ``L_max − 1`` alternatives (DSM-Private one, DSM-Welfare three:
an answer reveals no more slots than one offer of the preset), taken only if it can hold it
(docs/protocols.md, "Partners that answer a person").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from engine.actions import Message, Reschedule, Schedule
from engine.model import Errand, MeetingCopy
from engine.observe import (
    DecisionObservation,
    Delivered,
    TurnObservation,
    VoluntaryObservation,
)
from engine.protocol import D, TOP, band_cost, satisfaction, slot_words, slot_words_or
from engine.seats import Reply
from personas.base import insertion_costs

from .protocol import FIDELITIES, ProtocolPersona, Reading, as_int

__all__ = [
    "PRESETS",
    "D",
    "FIDELITIES",
    "DSMConfig",
    "DSMPersona",
    "Plan",
    "band_cost",
    "offer_utility",
    "plan_batch",
    "reward",
    "satisfaction",
    "scoring_cost",
]

PROTOCOL = "dsm"
# FIDELITIES: ``ours`` (the default) and ``paper`` (the authors' client where it differs), from .protocol
# D, TOP, satisfaction and band_cost: the score scale of the payloads, owned by engine.protocol.


# --------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DSMConfig:
    """The knobs of paper Table 9 (names as in the authors' ``dsm_*`` config keys)."""

    l_min: int = 1
    l_max: int = 12  # dsm_num_proposals
    beta: float = 1.0  # failure penalty
    theta: float = 0.0  # per-offer privacy cost weight
    w_soc: float = 1.0  # social-welfare weight
    cascade_depth: int = 2  # longest chain of prior-meeting moves in one plan (0 = never bump)
    displacement_targets: int = 4  # displacement plans considered per blocked slot
    exhaustive: bool = True  # search until a feasible slot is found or the pool is empty
    privacy_unit_cost: float = 1.0  # c_priv, per offered plan
    initial_budget: int = 100

    def __post_init__(self) -> None:
        if not 1 <= self.l_min <= self.l_max:
            raise ValueError(f"need 1 <= l_min <= l_max, got l_min={self.l_min}, l_max={self.l_max}")
        if self.cascade_depth < 0 or self.displacement_targets < 0:
            raise ValueError("cascade_depth and displacement_targets must be 0 or more")

    def to_json(self) -> dict[str, Any]:
        return {
            "dsm_lmin": self.l_min, "dsm_lmax": self.l_max, "dsm_beta": self.beta, "dsm_theta": self.theta,
            "dsm_social_welfare_weight": self.w_soc, "dsm_cascade_depth": self.cascade_depth,
            "dsm_displacement_targets": self.displacement_targets,
            "dsm_exhaustive_search": self.exhaustive, "dsm_privacy_unit_cost": self.privacy_unit_cost,
            "dsm_initial_budget": self.initial_budget,
        }


PRESETS: dict[str, DSMConfig] = {
    "welfare": DSMConfig(l_min=1, l_max=12, beta=1.0, theta=0.0, w_soc=1.0, cascade_depth=2,
                         displacement_targets=4, exhaustive=True),
    "private": DSMConfig(l_min=1, l_max=2, beta=0.25, theta=10.0, w_soc=0.25, cascade_depth=1,
                         displacement_targets=2, exhaustive=False),
}


# --------------------------------------------------------------------------------------
# Scores, costs, rewards
# --------------------------------------------------------------------------------------
def scoring_cost(s: int) -> int:
    """``C(s) = D - s - 1`` for a non-zero score; a zero score costs nothing."""
    return D - s - 1 if s > 0 else 0


def reward(selected_score: int, availability: int, offer_size: int) -> int:
    """The flexibility-adjusted reward ``R = (D-1-s*) + max(0, min(A, L) - 1)``."""
    return (TOP - selected_score) + max(0, min(availability, offer_size) - 1)


def offer_utility(candidates: list[tuple[float, float]], L: int, cfg: DSMConfig) -> float:
    """``U(L) = p_succ(L)·v̄(L) + w_soc·p_succ(L) − θ·c_priv·L − β·(1 − p_succ(L))``.

    ``candidates`` are the untried plans in offer order, each as ``(p_i, v_i)``: the
    estimated probability that every scorer can do it and the initiator's own satisfaction
    level.  ``p_succ(L) = 1 − Π_{i<L}(1 − p_i)``; ``v̄(L)`` is the expected own satisfaction
    of the first jointly feasible plan among the first ``L``, given that one exists.
    """
    miss = 1.0
    ev = 0.0
    for p, v in candidates[:L]:
        ev += miss * p * v
        miss *= 1.0 - p
    p_succ = 1.0 - miss
    vbar = ev / p_succ if p_succ > 0 else 0.0
    return p_succ * vbar + cfg.w_soc * p_succ - cfg.theta * cfg.privacy_unit_cost * L - cfg.beta * (1.0 - p_succ)


# --------------------------------------------------------------------------------------
# Plans and what they take on one calendar
# --------------------------------------------------------------------------------------
Move = tuple[int, int, int]  # (meeting_id, from_slot, to_slot)


@dataclass(frozen=True)
class Plan:
    """Hold the meeting at ``slot`` after moving prior meetings as in ``moves``."""

    slot: int
    moves: tuple[Move, ...] = ()
    #: Plan id: ``"5"`` for a plain slot, ``"5/M1>12"`` (``/M3>9`` …) with moves (read often: made once)
    pid: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pid = str(self.slot)
        if self.moves:
            pid += "".join(f"/M{m}>{t}" for m, _f, t in self.moves)
        object.__setattr__(self, "pid", pid)

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "moves": [{"meeting_id": m, "from_slot": f, "to_slot": t}
                                             for m, f, t in self.moves]}

    @classmethod
    def from_json(cls, raw: Any) -> Plan | None:
        try:
            slot = int(raw["slot"])
            moves = tuple((int(mv["meeting_id"]), int(mv["from_slot"]), int(mv["to_slot"]))
                          for mv in raw.get("moves") or ())
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return cls(slot, moves)

    def short(self) -> str:
        """"slot 8" or "slot 8 with M1 moved to slot 11"."""
        return f"slot {self.slot}" + "".join(f" with M{m} moved to slot {t}" for m, _f, t in self.moves)


def _movable(item) -> bool:
    return isinstance(item, Errand) and not item.blocked


def plan_batch(calendar, plan: Plan, meeting_id: int | None, *, host: bool,
               must_move: Iterable[int] = ()) -> tuple[int, list] | None:
    """What ``plan`` takes on one calendar: ``(cost, actions)``, or ``None`` if impossible.

    ``host``: this agent takes part in the incoming meeting, so ``plan.slot`` must end up
    free and a ``schedule`` closes the batch.  Each move ``(m, f, t)`` applies to this
    calendar when it holds ``m`` at ``f``; ``must_move`` lists meetings this agent is known
    to share, which must then sit at ``f`` (a copy elsewhere cannot follow the plan).
    Displaced errands go to the lowest slots that stay free.  The actions form a batch
    that passes ``engine.rules.check_batch`` on ``calendar``.
    """
    actions: list = []
    cost = _plan(calendar, plan, meeting_id, host, must_move, actions)
    return None if cost is None else (cost, actions)


def plan_cost(calendar, plan: Plan, meeting_id: int | None, *, host: bool,
              must_move: Iterable[int] = ()) -> int | None:
    """The cost of :func:`plan_batch` alone (None: impossible), without making the actions:
    what scoring and ranking plans need, many times a turn."""
    return _plan(calendar, plan, meeting_id, host, must_move, None)


def _plan(calendar, plan: Plan, meeting_id: int | None, host: bool, must_move: Iterable[int],
          actions: list | None) -> int | None:
    """:func:`plan_batch`'s cost; its actions are appended to ``actions`` unless it is None."""
    S = len(calendar)
    if not 0 <= plan.slot < S:
        return None
    if not plan.moves:  # the common case, kept cheap
        if not host:
            return 0
        k = plan.slot
        it = calendar[k]
        if it is None:
            if actions is not None:
                actions.append(Schedule(meeting_id, k))
            return 0
        if not _movable(it):
            return None
        dest = next((s for s in range(S) if calendar[s] is None and s != k), None)
        if dest is None:
            return None
        if actions is not None:
            actions += [Reschedule(it.errand_id, k, dest, f"make room at slot {k}"), Schedule(meeting_id, k)]
        return it.cost
    cost = 0
    vacated: set[int] = set()
    targets: set[int] = set()
    moving = []
    for m, f, t in plan.moves:
        if not (0 <= f < S and 0 <= t < S) or f == t:
            return None
        it = calendar[f]
        if isinstance(it, MeetingCopy) and it.meeting_id == m:
            moving.append((m, f, t, it))
            vacated.add(f)
        elif m in must_move:
            return None
    clear: list[int] = []
    for m, f, t, it in moving:
        if t in targets:
            return None
        targets.add(t)
        tgt = calendar[t]
        if t in vacated or tgt is None:
            pass
        elif _movable(tgt):
            clear.append(t)
        else:
            return None
        if actions is not None:
            actions.append(Reschedule(m, f, t, f"DSM plan: M{m} moves to slot {t}"))
        cost += it.cost
    if host:
        k = plan.slot
        if k in targets:
            return None
        it = calendar[k]
        if k in vacated or it is None:
            pass
        elif _movable(it):
            clear.append(k)
        else:
            return None
        targets.add(k)
    if clear:
        free = [s for s in range(S) if (calendar[s] is None or s in vacated) and s not in targets]
        if len(free) < len(clear):
            return None
        for s, dest in zip(sorted(clear), free):
            item = calendar[s]
            if actions is not None:
                actions.append(Reschedule(item.errand_id, s, dest, f"make room at slot {s}"))
            cost += item.cost
    if host and actions is not None:
        actions.append(Schedule(meeting_id, plan.slot))
    return cost


# --------------------------------------------------------------------------------------
# Negotiation state (one per round)
# --------------------------------------------------------------------------------------
@dataclass
class _Offer:
    plans: list[Plan]
    recipients: dict[int, list[Plan]]  # who was asked about which plans
    turn: int
    subround: int


@dataclass
class _Round:
    round: int
    meeting_id: int
    participants: tuple[int, ...]
    # initiator side
    pool: list[tuple[Plan, int]] = field(default_factory=list)  # (plan, own satisfaction), ranked
    own: dict[str, int] = field(default_factory=dict)
    bumped: dict[str, tuple[int, ...]] = field(default_factory=dict)  # plan id -> extra responders
    tried: set[str] = field(default_factory=set)
    offers: list[_Offer] = field(default_factory=list)
    scores: dict[int, dict[str, int]] = field(default_factory=dict)  # scorer -> plan id -> s
    typed: set[int] = field(default_factory=set)  # scorers that answered with typed scores
    paid: dict[int, int] = field(default_factory=dict)  # scorer -> Σ C(s) this negotiation
    closed: bool = False
    responders: tuple[int, ...] | None = None
    # everyone
    decided: Plan | None = None
    failed: bool = False
    my_scored: dict[str, int] = field(default_factory=dict)  # responder: plan id -> s we reported
    offered_by: set[int] = field(default_factory=set)  # peers that sent me typed proposals
    settled: bool = False


# --------------------------------------------------------------------------------------
# The persona
# --------------------------------------------------------------------------------------
class DSMPersona(ProtocolPersona):
    """A DSM seat: ``DSMPersona("welfare")``, ``DSMPersona("private")``, or a preset with
    overrides of :class:`DSMConfig` fields (``DSMPersona("private", l_max=3)``)."""

    protocol = PROTOCOL

    @property
    def answer_alternatives(self) -> int:  # type: ignore[override]
        """An answer to a person reveals at most ``l_max`` slots, as one offer does: the slot
        asked about and ``l_max - 1`` others (at most 3): DSM-Private names one, DSM-Welfare three."""
        return max(0, min(3, self.config.l_max - 1))

    def __init__(self, preset: str = "welfare", *, fidelity: str = "ours", requeue: bool = False,
                 **overrides: Any) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown DSM preset {preset!r}; choose 'welfare' or 'private'")
        if fidelity not in FIDELITIES:
            raise ValueError(f"unknown fidelity {fidelity!r}; choose one of {', '.join(FIDELITIES)}")
        super().__init__()
        self.preset = preset
        #: "ours" (the default) or "paper": the authors' client where the paper and their code
        #: differ from ours (one round of offers; a failed offer is announced anyway and a
        #: participant that cannot take it books its first usable slot — a ghost meeting).
        self.fidelity = fidelity
        #: the variant that moves slots of its failed negotiations to the back of its offers
        self.requeue = requeue
        self._failed_slots: dict[int, int] = {}  # slot -> how many of my negotiations it failed
        self.config = replace(PRESETS[preset], **overrides) if overrides else PRESETS[preset]
        self.budget = self.config.initial_budget
        self.ledger: list[dict[str, Any]] = []
        self._r: _Round | None = None
        self._seen = 0  # typed scores received this game (for the feasibility estimate)
        self._seen_ok = 0  # ... of which above zero

    @property
    def model(self) -> str:
        if self.requeue:
            return f"dsm-{self.preset}-requeue"
        return f"dsm-{self.preset}" if self.fidelity == "ours" else f"dsm-{self.preset}@{self.fidelity}"

    @property
    def paper(self) -> bool:
        return self.fidelity == "paper"

    async def register(self, briefing) -> str | None:
        self.budget = self.config.initial_budget
        self.ledger = []
        self._r = None
        self._seen = self._seen_ok = 0
        self._failed_slots = {}
        return await super().register(briefing)

    def on_round_start(self, view) -> None:
        m = self.rs.meeting
        self._r = _Round(self.rs.round, m.id, tuple(m.participants))

    # -- typed DSM messages -----------------------------------------------------------------
    def on_typed(self, msg: Delivered, p: dict[str, Any]) -> list[Message]:
        st = self._r
        kind = p.get("kind")
        if kind == "proposals":
            st.offered_by.add(msg.sender)
            return self._answer_proposals(msg, p)
        if kind == "scores":
            if self.is_initiator and not st.closed:
                self._take_scores(msg.sender, p)
            return []
        if msg.sender not in st.participants:
            return []
        if kind == "decision":
            plan = Plan.from_json(p)
            if plan is not None and not self.is_initiator and (msg.sender in self.outsiders or (
                    "plan" not in p and msg.sender not in st.offered_by)):
                # A decision with no offer before it (and not a DSM initiator's, which always
                # names its plan): a person's proposal (quick key p) or an LLM's.  Answer it;
                # take it only if I can hold it.
                self.outsiders.add(msg.sender)
                if not plan.moves and self.cost(plan.slot) is not None:
                    st.decided, st.failed = plan, False
                    self.rs.agreed, self.rs.failed = plan.slot, False
                return self.answer_offer(msg.sender, [plan.slot])
            if plan is not None:
                st.decided, st.failed = plan, False
                self.rs.agreed, self.rs.failed = plan.slot, False
                self._settle_responder(p)
        elif kind == "fail":
            st.failed, st.decided = True, None
            self.rs.failed = True
            self._settle_responder(p)
        return []

    def adopt(self, slot: int) -> None:
        super().adopt(slot)
        self._r.decided, self._r.failed = Plan(slot), False

    # -- responder ------------------------------------------------------------------------
    def _score_plans(self, plans: list[Plan]) -> dict[str, int]:
        view = self.view
        host = self.seat in self.meeting.participants
        mine = set(view.prior_meetings)
        out = {}
        for plan in plans:
            must = [m for m, _f, _t in plan.moves if m in mine]
            out[plan.pid] = satisfaction(plan_cost(view.calendar, plan, self.meeting.id, host=host, must_move=must))
        return out

    def _answer_proposals(self, msg: Delivered, p: dict) -> list[Message]:
        plans = _plans_from_payload(p, self.num_slots)
        if not plans:
            return [self.text(msg.sender, f"Agent {self.seat}: I could not read any slot in your DSM proposal "
                                          f"for meeting M{self.meeting.id}.")]
        scores = self._score_plans(plans)
        self._r.my_scored.update(scores)
        by_slot: dict[str, int] = {}
        for plan in plans:
            key = str(plan.slot)
            by_slot[key] = max(by_slot.get(key, 0), scores[plan.pid])
        fields: dict[str, Any] = {"subround": p.get("subround"), "scores": by_slot,
                                  "scoring_cost": sum(scoring_cost(s) for s in scores.values())}
        if any(plan.moves for plan in plans):
            fields["plan_scores"] = scores
        parts = "; ".join(f"{plan.short()}: {'works' if scores[plan.pid] > 0 else 'does not work'} "
                          f"(score {scores[plan.pid]})" for plan in plans)
        content = f"Agent {self.seat} for meeting M{self.meeting.id}: {parts}."
        return [self.msg(msg.sender, "scores", content, **fields)]

    def _settle_responder(self, p: dict) -> None:
        st = self._r
        if st.settled:
            return
        st.settled = True
        paid = sum(scoring_cost(s) for s in st.my_scored.values())
        rw = p.get("reward")
        got = 0
        if isinstance(rw, dict):
            got = as_int(rw.get("reward")) or 0
        if paid or got:
            self.budget += got - paid
            self.ledger.append({"round": st.round, "meeting_id": st.meeting_id, "role": "responder",
                                "paid": paid, "received": got, "budget": self.budget})

    # -- initiator ------------------------------------------------------------------------
    def on_turn(self, obs: TurnObservation) -> list[Message]:
        st = self._r
        if not self.is_initiator or st.closed:
            return []
        return self._initiate(obs)

    def _build_pool(self) -> None:
        st = self._r
        view = self.view
        cal = view.calendar
        cfg = self.config
        ranked: list[tuple[tuple, Plan, int]] = []
        # a plain plan's cost at every slot (plan_cost(cal, Plan(k), ..., host=True)), in one pass
        plain_costs = insertion_costs(cal)
        for k in range(view.num_slots):
            cost = plain_costs[k]
            if cost is not None:
                plain = Plan(k)
                s = satisfaction(cost)
                ranked.append((((0, -_their_s(cost), k, "") if self.paper else (0, -s, 0, k, "")), plain, s))
            elif isinstance(cal[k], MeetingCopy) and cfg.cascade_depth > 0 and cfg.displacement_targets > 0:
                for plan in self._displacements(k):
                    cost = plan_cost(cal, plan, st.meeting_id, host=True)
                    if cost is None:
                        continue
                    s = satisfaction(cost)
                    ranked.append((((0, -_their_s(cost), k, plan.pid)) if self.paper
                                   else (1, -s, len(plan.moves), k, plan.pid), plan, s))
                    st.bumped[plan.pid] = tuple(sorted(
                        {a for m, _f, _t in plan.moves for a in view.prior_meetings.get(m, ())}
                        - set(st.participants)))
        if self.requeue and self._failed_slots:
            # slots of my earlier failed negotiations go to the back, fewest failures first
            ranked.sort(key=lambda x: (self._failed_slots.get(x[1].slot, 0), x[0]))
        else:
            ranked.sort(key=lambda x: x[0])
        st.pool = [(plan, s) for _key, plan, s in ranked]
        st.own = {plan.pid: s for plan, s in st.pool}

    def _displacements(self, k: int) -> list[Plan]:
        """Plans that free my slot ``k`` by moving the prior meeting there (and, up to the
        cascade depth, a prior meeting at its target), best targets first."""
        view = self.view
        cal = view.calendar
        cfg = self.config
        first = cal[k]
        if first.meeting_id not in view.prior_meetings:
            return []
        out: list[Plan] = []

        def extend(moves: tuple[Move, ...], meeting: int, frm: int, depth: int) -> None:
            used = {k} | {f for _m, f, _t in moves} | {t for _m, _f, t in moves}
            moved = {m for m, _f, _t in moves} | {meeting}
            cands = []
            for t in range(len(cal)):
                if t in used:
                    continue
                it = cal[t]
                if it is None:
                    cands.append((0, t, None))
                elif _movable(it):
                    cands.append((it.cost, t, None))
                elif (isinstance(it, MeetingCopy) and depth < cfg.cascade_depth
                      and it.meeting_id in view.prior_meetings and it.meeting_id not in moved):
                    cands.append((it.cost + 1, t, it.meeting_id))
            cands.sort()
            for _c, t, nxt in cands[: cfg.displacement_targets]:
                if len(out) >= cfg.displacement_targets:
                    return
                mv = moves + ((meeting, frm, t),)
                if nxt is None:
                    out.append(Plan(k, mv))
                else:
                    extend(mv, nxt, t, depth + 1)

        extend((), first.meeting_id, k, 1)
        return out

    def _scorers(self, plan: Plan) -> tuple[int, ...]:
        st = self._r
        if st.responders is None:
            st.responders = tuple(a for a in st.participants if a != self.seat)
        bumped = st.bumped.get(plan.pid)
        return st.responders + bumped if bumped else st.responders

    def _q(self) -> float:
        """Chance that one other agent can do one of my candidate plans: the share of
        non-zero scores received so far this game, smoothed towards my own share of
        usable slots (a prior worth two observations)."""
        cal = self.view.calendar
        own_ok = sum(1 for it in cal if it is None or _movable(it)) / max(1, len(cal))
        return (self._seen_ok + 2.0 * own_ok) / (self._seen + 2.0)

    def choose_offer_size(self, rest: list[tuple[Plan, int]]) -> tuple[int, float]:
        """``(L, U(L))`` maximising ``U`` over ``L_min..min(L_max, len(rest))``."""
        cfg = self.config
        q = self._q()
        cands = [(q ** len(self._scorers(plan)), float(s)) for plan, s in rest]
        best_l, best_u = 0, float("-inf")
        hi = min(cfg.l_max, len(rest))
        for L in range(min(cfg.l_min, hi), hi + 1):
            if L <= 0:
                continue
            u = offer_utility(cands, L, cfg)
            if u >= best_u:  # ties go to the wider offer (with θ = 0 width costs nothing)
                best_l, best_u = L, u
        return best_l, best_u

    def _initiate(self, obs: TurnObservation) -> list[Message]:
        st = self._r
        cfg = self.config
        if not st.offers:
            self._build_pool()
            if obs.turn + 1 >= obs.max_turns and st.pool:
                # No sweep left for answers: announce my own best plain slot.
                own_best = next((p for p, _s in st.pool if not p.moves), None)
                if own_best is not None:
                    st.offers.append(_Offer([own_best], {}, obs.turn, 0))
                    return self._decide_plan(own_best, fallback=True)
            if self.paper and not st.pool:
                # theirs: nothing to offer, nothing sent, nothing agreed (DECISION: _paper_decide)
                st.closed, st.failed = True, True
                self.rs.failed = True
                return []
            return self._offer(obs) or self._fail("I have no slot I can use for it")
        last = st.offers[-1]
        waiting = [a for a, plans in last.recipients.items()
                   if any(p.pid not in st.scores.get(a, {}) for p in plans)]
        if waiting and obs.turn <= last.turn:
            return []  # answers are still coming this sweep
        best = self._best()
        if best is not None:
            return self._decide_plan(best)
        if waiting and not any(a in st.scores for a in st.participants):
            # Nobody answered at all: go ahead with my own best plain slot.
            own_best = next((p for p in last.plans if not p.moves), None)
            if own_best is not None:
                return self._decide_plan(own_best, fallback=True)
        if self.paper:
            # theirs: one round of offers; with no plan everyone can do, the best offered
            # plan is announced anyway (a participant that cannot take it books its first
            # usable slot in DECISION, leaving a ghost copy)
            return self._decide_plan(self._best_anyway(), failed_offer=True)
        rest = [(p, s) for p, s in st.pool if p.pid not in st.tried]
        if not rest:
            return self._fail("none of my usable slots works for everyone")
        if obs.turn + 1 >= obs.max_turns:
            return self._fail("no slot works for everyone and time is up")
        if not cfg.exhaustive and self.choose_offer_size(rest)[1] <= -cfg.beta:
            return self._fail("no offered slot works for everyone")
        return self._offer(obs) or self._fail("no slot works for everyone")

    def _offer(self, obs: TurnObservation) -> list[Message]:
        st = self._r
        if obs.turn + 1 >= obs.max_turns:  # no sweep left for the answers
            return []
        rest = [(p, s) for p, s in st.pool if p.pid not in st.tried]
        if not rest:
            return []
        L, _u = self.choose_offer_size(rest)
        batch = [p for p, _s in rest[:L]]
        recipients: dict[int, list[Plan]] = {a: list(batch) for a in self.responders}
        for plan in batch:
            st.tried.add(plan.pid)
            for b in st.bumped.get(plan.pid, ()):
                recipients.setdefault(b, []).append(plan)
        sub = len(st.offers) + 1
        st.offers.append(_Offer(batch, recipients, obs.turn, sub))
        out = []
        for a, plans in recipients.items():
            fields: dict[str, Any] = {"subround": sub, "slots": _unique(p.slot for p in plans), "L": len(plans),
                                      "participants": list(st.participants)}
            if any(p.moves for p in plans):
                fields["plans"] = {p.pid: p.to_json() for p in plans}
            content = offer_text(self.seat, plans, st.meeting_id, a in st.participants)
            out.append(self.msg(a, "proposals", content, **fields))
        return out

    def _take_scores(self, sender: int, p: dict) -> None:
        st = self._r
        asked = {plan.pid: plan for off in st.offers for plan in off.recipients.get(sender, [])}
        if not asked:
            return
        got = st.scores.setdefault(sender, {})
        raw_plan = p.get("plan_scores") if isinstance(p.get("plan_scores"), dict) else {}
        raw_slot = p.get("scores") if isinstance(p.get("scores"), dict) else {}
        for pid, plan in asked.items():
            if pid in got:
                continue
            v = raw_plan.get(pid, raw_slot.get(str(plan.slot)) if not plan.moves else None)
            s = _as_score(v)
            if s is None:
                continue
            got[pid] = s
            self._seen += 1
            self._seen_ok += s > 0
            st.paid[sender] = st.paid.get(sender, 0) + scoring_cost(s)
        st.typed.add(sender)

    def on_text(self, msg: Delivered, reading: Reading) -> list[Message]:
        """Free text (or another protocol's message).  The initiator reads a responder's
        answer as scores for what it was asked; everything else goes to the polite base."""
        st = self._r
        if self.is_initiator and not st.closed and st.offers:
            asked = {plan.pid: plan for off in st.offers for plan in off.recipients.get(msg.sender, [])
                     if not plan.moves}
            if asked and (reading.works or reading.fails or reading.proposed):
                got = st.scores.setdefault(msg.sender, {})
                for pid, plan in asked.items():
                    if plan.slot in reading.fails:
                        got[pid] = 0
                    elif plan.slot in reading.works or plan.slot in reading.proposed:
                        got[pid] = satisfaction(reading.costs.get(plan.slot, 1))
                return super().on_text(msg, reading) if reading.question else []
        return super().on_text(msg, reading)

    def _best(self) -> Plan | None:
        """The offered plan nobody rated 0: fewest missing scores, then the least total
        cost read back from the scores (:func:`band_cost`), then the smallest worst
        dissatisfaction, then the lowest slot, then my own order."""
        st = self._r
        best_key, best = None, None
        order = {plan.pid: i for i, (plan, _s) in enumerate(st.pool)}
        for off in st.offers:
            for plan in off.plans:
                s_own = st.own.get(plan.pid, 0)
                if s_own <= 0:
                    continue
                deficits = [TOP - s_own]
                ok = True
                answered = unknown = 0
                for a in self._scorers(plan):
                    s = st.scores.get(a, {}).get(plan.pid)
                    if s is None:
                        # No score from this peer: a plain slot may go ahead on what we know
                        # (silence is consent, but confirmed plans rank first); a displacement
                        # needs every bumped agent's typed score.
                        if plan.moves:
                            ok = False
                            break
                        unknown += 1
                        continue
                    if s <= 0:
                        ok = False
                        break
                    answered += 1
                    deficits.append(TOP - s)
                if not ok or answered == 0:
                    continue
                if plan.moves and not all(a in st.typed for a in self._scorers(plan)):
                    continue
                key = (unknown, sum(band_cost(TOP - d) for d in deficits), max(deficits), plan.slot,
                       order.get(plan.pid, 0))
                if best_key is None or key < best_key:
                    best_key, best = key, plan
        return best

    def _best_anyway(self) -> Plan:
        """Paper fidelity: the offered plan of least total dissatisfaction over the initiator
        and its scorers, a missing or zero score counting as fully dissatisfied (their
        ``_plan_rank``), then fewer scorers, then the lower slot."""
        st = self._r
        best_key, best = None, None
        for off in st.offers:
            for plan in off.plans:
                scorers = self._scorers(plan)
                total = st.own.get(plan.pid, 0) + sum(st.scores.get(a, {}).get(plan.pid, 0) for a in scorers)
                key = (TOP * (len(scorers) + 1) - total, len(scorers) + 1, plan.slot, plan.pid)
                if best_key is None or key < best_key:
                    best_key, best = key, plan
        assert best is not None
        return best

    def _decide_plan(self, plan: Plan, fallback: bool = False, failed_offer: bool = False) -> list[Message]:
        st = self._r
        if failed_offer:
            for off in st.offers:
                for p in off.plans:
                    self._note_failed(p.slot)
        st.closed, st.decided = True, plan
        self.rs.agreed = plan.slot
        deciding = next(off for off in reversed(st.offers) if plan in off.plans)
        targets = list(self.responders) + list(st.bumped.get(plan.pid, ()))
        out = []
        paid_out = 0
        moves_text = "".join(f" Meeting M{m} moves from slot {f} to slot {t} first." for m, f, t in plan.moves)
        how = " (no scores reached me, so I use my own best slot)" if fallback else ""
        for a in targets:
            fields: dict[str, Any] = {"slot": plan.slot, "plan": plan.pid, "moves": plan.to_json()["moves"],
                                      "participants": list(st.participants)}
            s_star = st.scores.get(a, {}).get(plan.pid)
            if s_star is not None and s_star > 0:
                asked = deciding.recipients.get(a, [])
                avail = sum(1 for p in asked if st.scores.get(a, {}).get(p.pid, 0) > 0)
                r = reward(s_star, avail, len(asked))
                paid_out += r
                fields["reward"] = {"selected_score": s_star, "availability": avail, "offer_size": len(asked),
                                    "scoring_cost": st.paid.get(a, 0), "reward": r}
            elif a in st.paid:
                fields["reward"] = {"scoring_cost": st.paid.get(a, 0), "reward": 0}
            content = (f"Agent {self.seat} decided: meeting M{st.meeting_id} is at slot {plan.slot}{how}. "
                       f"Please schedule it there.{moves_text}")
            out.append(self.msg(a, "decision", content, **fields))
        self._settle_initiator(sum(st.paid.values()), paid_out)
        return out

    def _note_failed(self, slot: int) -> None:
        self._failed_slots[slot] = self._failed_slots.get(slot, 0) + 1

    def _fail(self, why: str) -> list[Message]:
        st = self._r
        for slot in {p.slot for off in st.offers for p in off.plans}:
            self._note_failed(slot)
        st.closed, st.failed, st.decided = True, True, None
        self.rs.failed = True
        out = []
        for a in self.responders:
            content = (f"Agent {self.seat}: {why}, so meeting M{st.meeting_id} will not be scheduled this "
                       "round; please do not schedule it.")
            out.append(self.msg(a, "fail", content, tried=len(st.tried),
                                reward={"scoring_cost": st.paid.get(a, 0), "reward": 0}))
        self._settle_initiator(sum(st.paid.values()), 0)
        return out

    def _settle_initiator(self, received: int, paid_out: int) -> None:
        st = self._r
        self.budget += received - paid_out
        self.ledger.append({"round": st.round, "meeting_id": st.meeting_id, "role": "initiator",
                            "received": received, "paid": paid_out, "budget": self.budget,
                            "subrounds": len(st.offers), "offered": len(st.tried)})

    # -- VOLUNTARY and DECISION -------------------------------------------------------------
    def on_volunteer(self, obs: VoluntaryObservation) -> list:
        """A bumped agent outside the meeting moves its copy of the prior meeting as agreed."""
        if self._r.my_scored and not self._r.settled:
            self._settle_responder({})  # my plans were not chosen: I pay for my scores, no reward
        plan = self._r.decided
        if plan is None or not plan.moves or obs.rejection:
            return []
        mine = [m for m, _f, _t in plan.moves if m in obs.view.prior_meetings]
        if not mine:
            return []
        res = plan_batch(obs.view.calendar, plan, None, host=False, must_move=mine)
        return [] if res is None else res[1]

    async def decide(self, obs: DecisionObservation) -> Reply:
        self._enter(obs.round, obs.meeting, obs.view)
        self._catch_up(obs.round_messages)
        st = self._r
        if self.paper and (st.failed or st.decided is not None or obs.attempt > 0):
            return self._paper_decide(obs)
        if st.failed:
            return Reply(text=f"No slot was agreed for meeting M{obs.meeting.id}; I abstain.")
        if st.decided is not None:
            plan = st.decided
            mine = [m for m, _f, _t in plan.moves if m in obs.view.prior_meetings]
            res = plan_batch(obs.view.calendar, plan, obs.meeting.id, host=True, must_move=mine)
            if res is None or obs.attempt > 0:
                return Reply(text=f"I cannot take slot {plan.slot} as agreed; I abstain.")
            return Reply(actions=tuple(res[1]))
        # No DSM decision reached me (a free-text or other-protocol initiator): the base
        # follows what peers proposed or decided, else my cheapest slot.
        return await super().decide(obs)


    def _paper_decide(self, obs: DecisionObservation) -> Reply:
        """Paper fidelity in DECISION (the authors' client): the agreed plan if this seat can
        carry it out.  One it cannot take: if the agreed slot is itself *usable* (free, or
        holding an errand or a meeting copy while some other slot is free) theirs still aims
        at it — a meeting copy there gives an empty batch (theirs cannot move it without an
        agreed target), which the engine rejects; otherwise the first usable slot in slot
        order, an errand there moved to the lowest free slot.  With no plan agreed, nothing.
        Retry k (after a rejected batch) takes usable slot k, agreed or not, the same way —
        so a seat whose agreed slot holds its copy of another meeting books usable slot 1
        (or 2, ...) after one (or more) rejected empty batches, never usable slot 0."""
        st = self._r
        cal = obs.view.calendar
        usable = first_usable_slots(cal)
        if obs.attempt == 0:
            if st.decided is None:  # nothing was agreed: theirs submits nothing
                return Reply(text=f"No slot was agreed for meeting M{obs.meeting.id}; I abstain.")
            plan = st.decided
            mine = [m for m, _f, _t in plan.moves if m in obs.view.prior_meetings]
            res = plan_batch(cal, plan, obs.meeting.id, host=True, must_move=mine)
            if res is not None:
                return Reply(actions=tuple(res[1]))
            slot = plan.slot if plan.slot in usable else (usable[0] if usable else None)
        else:
            slot = usable[obs.attempt] if obs.attempt < len(usable) else None
        if slot is None:
            return Reply(text=f"I have no usable slot left for meeting M{obs.meeting.id}.")
        it = cal[slot]
        if it is None:
            return Reply(actions=(Schedule(obs.meeting.id, slot),))
        if isinstance(it, Errand):
            dest = next(s for s in range(len(cal)) if s != slot and cal[s] is None)
            return Reply(actions=(Reschedule(it.errand_id, slot, dest, f"make room at slot {slot}"),
                                  Schedule(obs.meeting.id, slot)))
        return Reply(text=f"Slot {slot} holds meeting M{it.meeting_id}, which I cannot move on my own.")


# --------------------------------------------------------------------------------------
def first_usable_slots(calendar) -> list[int]:
    """The authors' "schedulable" slots, in slot order: free, or holding a movable errand or
    a meeting copy while some other slot is free (blocked errands never)."""
    free = [s for s, it in enumerate(calendar) if it is None]
    out = []
    for s, it in enumerate(calendar):
        if it is None:
            out.append(s)
        elif (isinstance(it, MeetingCopy) or _movable(it)) and any(f != s for f in free):
            out.append(s)
    return out


def _their_s(cost: int) -> int:
    """The authors' satisfaction of a cost: 11 − cost, at least 1 (cost 1 → 10, 10 or more → 1)."""
    return max(1, TOP - max(0, cost))


def _unique(xs: Iterable[int]) -> list[int]:
    out: list[int] = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out


def _as_score(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        s = int(v)
    except (TypeError, ValueError):
        return None
    return min(TOP, max(0, s))


def _plans_from_payload(p: dict, num_slots: int) -> list[Plan]:
    """The plans a ``proposals`` payload offers: its ``plans`` map, else its ``slots``."""
    raw = p.get("plans")
    plans: list[Plan] = []
    seen: set[Plan] = set()
    if isinstance(raw, dict):
        cands = [Plan.from_json(v) for v in raw.values()]
    else:
        cands = [Plan(s) for s in map(as_int, p.get("slots") or ()) if s is not None]
    for plan in cands:
        if plan is not None and 0 <= plan.slot < num_slots and plan not in seen:
            seen.add(plan)
            plans.append(plan)
    return plans


def offer_text(sender: int, plans: list[Plan], meeting_id: int, participant: bool) -> str:
    """The English of a ``proposals`` DM.

    Worded for the shared free-text reader too (``engine.protocol.read_text``): the plain slots
    sit in one "which of slots … work for you" question, so another protocol's bot or an
    LLM reads them as asked; the score scale is spelled out in words, so no stray number
    reads as a slot.
    """
    plain = [p.slot for p in plans if not p.moves]
    groups: dict[tuple[int, int, int], list[int]] = {}
    chains: list[Plan] = []
    for p in plans:
        if len(p.moves) == 1:
            m, f, t = p.moves[0]
            groups.setdefault((p.slot, m, f), []).append(t)
        elif p.moves:
            chains.append(p)
    extra = [f"slot {slot} if meeting M{m} moves from slot {f} to {slot_words_or(ts)}"
             for (slot, m, f), ts in groups.items()]
    extra += [f"slot {p.slot} if " + " and ".join(f"meeting M{m} moves from slot {f} to slot {t}"
                                                  for m, f, t in p.moves) for p in chains]
    scale = "zero = impossible, eleven = free" if participant else "zero = impossible, eleven = no cost to you"
    if plain:
        head = (f"Agent {sender} asks which of {slot_words(plain)} work for you for meeting M{meeting_id}."
                if len(plain) > 1 else
                f"Agent {sender} asks whether slot {plain[0]} works for you for meeting M{meeting_id}.")
        if extra:
            head += " It could also use " + " or ".join(extra) + "."
    else:
        head = (f"Agent {sender} would like to hold meeting M{meeting_id} at " + " or ".join(extra)
                + (", which moves a meeting you take part in." if not participant else "."))
    return f"{head} Please score each option ({scale})."
