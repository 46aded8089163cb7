"""The annotated example study that ``calbench study init PATH`` writes."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = '''\
# A CalBench pilot study.  Edit this file, then:
#   calbench study check study.toml              # validate and print the design
#   calbench study check study.toml --dry-run --mock  # simulated participants play a cycle (--mock: own LLM)
#   calbench study run study.toml --participant P001
#   calbench study status study.toml ; calbench study export study.toml --out data/
# Every key is explained; delete what you do not need (defaults are shown).

[study]
name = "pilot-1"          # the study's id in the database (letters, digits, - _ .)
title = "Scheduling with partners"
seed = 7                  # completion codes and random assignment follow from it
code_prefix = "CB"        # completion codes look like CB-7K2Q9M
simulated_protocol = "person-like"  # how simulated participants (study check --dry-run) play: like a person, or imap, sdmap, ...
minutes_per_game = 8      # for the time estimate only

# -- conditions (treatments) ------------------------------------------------------------------
# Each condition is a table: who sits in the other seats, the participant's seat, the channels
# and the talk turns per round.  Partners: imap, sdmap, dsm-welfare, dsm-private, passive or
# llm:MODEL[+variant]; one name for every other seat or a list with one name per other seat.
[[conditions]]
name = "scripted"
description = "four IMAP protocol partners"
partners = "imap"
seat = 0                  # used when [assignment] does not rotate seats
channels = ["dm"]         # dm, participant (the meeting's group chat), all (everyone's chat)
max_turns = 6             # talk sweeps per round
# phrasebook = "all"      # messages in a person's words, whoever wrote them: off | scripted | all (study guide §4)
cost = "task"             # task (the tasks' own costs) | uniform | varied (re-costs seed:N scenarios)
# renamed_from = ["old"]  # renamed mid-study? the old names: their games count under this one

[[conditions]]
name = "llm"
description = "one LLM partner, three IMAP partners"
partners = ["llm:mock-model", "imap", "imap", "imap"]
seat = 0
channels = ["dm"]
max_turns = 6
[conditions.llm]          # endpoint of this condition's llm: seats (the key stays in the environment)
base_url = "http://127.0.0.1:8765/v1"   # 'calbench mock-llm' listens here; put your endpoint instead
api_key_env = "OPENAI_API_KEY"          # the NAME of the variable holding the key, never the key
timeout = 60

# -- tasks ------------------------------------------------------------------------------------
[tasks]
pool = ["seed:100", "seed:101", "seed:102", "seed:103"]   # task references: seed:N, canonical:A-B, tasks.jsonl
games_per_condition = 1   # each participant plays every condition this many times
practice = "seed:99"      # one task played first and marked practice (delete for none)

# -- assignment -------------------------------------------------------------------------------
# latin: a Latin square over conditions (order), task blocks and seat positions; participants
#        are numbered in order of arrival and one cycle balances every condition in every
#        position.  random: shuffled per participant from seed.  fixed: everyone the same.
[assignment]
method = "latin"
seed = 7
seats = [0, 2]            # seat positions rotated over participants (delete: each condition's seat)

# -- timing -----------------------------------------------------------------------------------
[timing]
talk_seconds = 90         # per talk turn; at 0 the turn ends (recorded as a timeout)
decision_seconds = 120    # per decision; at 0 the batch is submitted as it stands (or no move)
on_decision_timeout = "submit"   # submit | no_move

# -- consent and instructions (Markdown; text = "..." or file = "consent.md") -------------------
[consent]
text = """
# Consent
You will schedule meetings with other players by chatting and moving items in a calendar.
The session takes about 30 minutes. You may stop at any time. We store your moves, your
messages and your answers under a code, never your name.

Press **y** to agree and continue, or **n** (or **ctrl+q**) to leave: either one records that you
do not take part, and nothing more is asked.
"""

[instructions]
text = """
# How to play
Each round one meeting is to be scheduled. Talk with the other participants of the meeting,
then decide: put the meeting in a slot that is free for you (moving an errand costs its cost).
A meeting counts only if every participant puts it in the same slot. Your calendar is private.

After some rounds you are asked what you think of other players' calendars: for each slot,
could they have taken the meeting there as the round started (the slot free, or holding only
an errand they could move)? Answer from −3 (surely not) to +3 (surely yes); 0 is "no idea".
"""

# -- comprehension quiz (must be passed before play; wrong answers are explained) ---------------
[[quiz]]
question = "When is a meeting scheduled?"
choices = ["When I put it in my calendar", "When every participant puts it in the same slot", "When someone proposes a slot"]
answer = 1                # 0 = the first choice
explanation = "Everyone in the meeting must place it in the same slot in the same round."

[[quiz]]
question = "Who sees your calendar?"
choices = ["Everyone", "Only the participants of the meeting", "Nobody but me"]
answer = 2
explanation = "Your calendar is private: others learn only what you tell them."

# -- questionnaires: when = before | after_game | after_study; items likert | choice | text -------
[[questionnaires]]
id = "pre"
when = "before"
title = "Before we start"
items = [
  { id = "experience", text = "How often do you schedule meetings with others?", type = "choice", choices = ["rarely", "monthly", "weekly", "daily"] },
]

[[questionnaires]]
id = "game"
when = "after_game"
title = "About this game"
items = [
  { id = "satisfied", text = "I am satisfied with the meetings we scheduled.", type = "likert", points = 7 },
  { id = "overshared", text = "I revealed more about my calendar than I wanted to.", type = "likert", points = 7 },
]

[[questionnaires]]
id = "post"
when = "after_study"
title = "Last questions"
items = [
  { id = "partner_human", text = "Did any partner seem to be a person?", type = "choice", choices = ["yes", "no", "not sure"] },
  { id = "comments", text = "Anything else you want to tell us?", type = "text", optional = true },
]

# -- belief elicitation (the human-observer VPS) -------------------------------------------------
# After the chosen rounds the participant answers, for the chosen seats and every slot: as the
# round started, could that seat have taken the meeting there (the slot free, or only an
# errand they could move)? -3 surely not .. 0 no idea .. +3 surely yes (scored against the
# truth at the start of the round, as the privacy measure is).
[beliefs]
enabled = true
rounds = "last"           # "last", "all" or a list of rounds counted from 1 (as on screen), e.g. [1, 3]
targets = "meeting"       # "meeting" (the other participants of that round), "all", or seat numbers
practice = false          # ask in the practice game too
watched_rounds = false    # true: also after rounds whose meeting the participant was not in (the grid says so)

# -- payment (shown on the completion screen, written to payments.csv; delete for none) ---------
[payment]
currency = "£"
show_up = 5.00            # for completing the study
per_meeting = 0.25        # bonus per meeting of yours scheduled (practice excluded)
per_cost = 0.0            # taken off the bonus per unit of cost your moves incurred
cap = 3.00                # the most the bonus can reach

# -- online pool (browser links from 'calbench serve --study') ----------------------------------
# A link may carry the pool's id for the participant, e.g. LINK&participant=5f3c...; it is kept
# with the participant.  return_url is shown at the end ({code}: the code for how the session
# ended, {pool_id}: the pool's id).  max_participants turns on one public link for the whole
# pool (serve --study prints it): each pool id gets its own participant, the same id always the
# same one, and no more than max_participants at a time.
[pool]
id_param = "participant"  # Prolific: "PROLIFIC_PID"
# return_url = "https://app.prolific.com/submissions/complete?cc={code}"
# max_participants = 40   # the public link admits at most this many (declined etc. free a place)
# time_limit_minutes = 60 # a session older than this ends as timed_out at its next step
# [pool.declined]         # the pool's code per outcome: completed, declined, screened_out, timed_out
# code = "C1NOCONSENT"
'''


def write_example(path: str | Path, *, force: bool = False) -> Path:
    p = Path(path)
    if p.exists() and not force:
        raise FileExistsError(f"{p} exists; choose another path or pass --force to overwrite it")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(EXAMPLE, encoding="utf-8")
    return p
