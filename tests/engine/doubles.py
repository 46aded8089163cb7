"""Small test personas for the game-loop tests (test doubles, not reference protocols).

``PlanPersona`` knows a plan (meeting id -> slot) handed to it by the test; the
initiator announces it by DM, and every participant schedules it in DECISION, moving
whatever errand sits there to its lowest free slot.  ``ScriptPersona`` replays replies
given by the test, so a test can force a rejection, a ghost meeting, silence, etc.
"""

from __future__ import annotations

from engine.actions import Message, Reschedule, Schedule
from engine.seats import Reply


def clear_and_schedule(calendar, meeting_id, slot):
    actions = []
    item = calendar[slot]
    if item is not None:
        free = [s for s, it in enumerate(calendar) if it is None and s != slot]
        actions.append(Reschedule(item.item_id, slot, free[0], "make room"))
    actions.append(Schedule(meeting_id, slot))
    return actions


class PlanPersona:
    kind = "test"
    model = "plan"

    def __init__(self, plan: dict[int, int]):
        self.plan = plan
        self.observations = []

    async def register(self, briefing):
        self.observations.append(briefing)
        return None

    async def speak(self, obs):
        self.observations.append(obs)
        m = obs.meeting
        if obs.turn == 0 and obs.view.seat == m.speaker_order[0]:
            slot = self.plan[m.id]
            return Reply(actions=tuple(Message("dm", f"Let's meet at slot {slot}.", to)
                                       for to in m.participants if to != obs.view.seat))
        return Reply()

    async def volunteer(self, obs):
        self.observations.append(obs)
        return Reply()

    async def decide(self, obs):
        self.observations.append(obs)
        return Reply(actions=tuple(clear_and_schedule(obs.view.calendar, obs.meeting.id, self.plan[obs.meeting.id])))


class ScriptPersona:
    """Replies from lists given by the test; falls back to passing / PlanPersona decisions."""

    kind = "test"
    model = "script"

    def __init__(self, speak=None, decide=None, volunteer=None, plan=None):
        self._speak = list(speak or [])
        self._decide = list(decide or [])
        self._volunteer = list(volunteer or [])
        self.plan = plan or {}
        self.observations = []

    async def register(self, briefing):
        return None

    async def speak(self, obs):
        self.observations.append(obs)
        if self._speak:
            item = self._speak.pop(0)
            return item(obs) if callable(item) else item
        return Reply()

    async def volunteer(self, obs):
        self.observations.append(obs)
        if self._volunteer:
            item = self._volunteer.pop(0)
            return item(obs) if callable(item) else item
        return Reply()

    async def decide(self, obs):
        self.observations.append(obs)
        if self._decide:
            item = self._decide.pop(0)
            return item(obs) if callable(item) else item
        return Reply(actions=tuple(clear_and_schedule(obs.view.calendar, obs.meeting.id, self.plan[obs.meeting.id])))


def E(i, c=1, b=False):
    """An errand as it appears in a task row (``b``: blocked)."""
    return {"errand_id": i, "cost": c, **({"blocked": True} if b else {})}


def hand_task(calendars, meetings, task_id="hand"):
    """A small hand-made task: calendars as row JSON, meetings as participant lists, each
    meeting's participants speaking in the order listed (a row without speaker orders would
    get the authors' seeded draw, engine.model.balanced_speaker_orders)."""
    from engine.model import Task

    return Task.from_row({"task_id": task_id, "seed": 1, "calendars": calendars,
                          "meetings": [{"id": i + 1, "participants": p, "speaker_order": list(p), "cost": 1,
                                        "duration": 1} for i, p in enumerate(meetings)]})


def one_error_line(err: str) -> str:
    """The single ``calbench: error: ...`` line a user mistake prints (no traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("calbench: error: ") and "Traceback" not in err
    return lines[0]


def round_calendars(task, trace):
    """Calendars at the start of each round: the task's, then each resolution's."""
    from engine.model import item_from_json

    out = [list(task.calendars)]
    for e in trace["events"]:
        if e["type"] == "resolution":
            out.append([tuple(item_from_json(it) for it in cal) for cal in e["data"]["calendars"]])
    return out
