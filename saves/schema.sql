-- The CalBench save database (SQLite, WAL).  Forward migrations, applied in order.
--
-- Each block that starts with a line "-- migration N: what it does" is one step.  A new
-- database runs every step; an older one runs only the steps above the version recorded in
-- schema_version, each in its own transaction.  Never edit a step that has shipped: add a
-- new one below.  saves/store.py may also run a Python backfill after a step (see
-- BACKFILLS there).  JSON columns hold UTF-8 JSON text.

-- migration 1: games and their events
CREATE TABLE games (
    game_id      TEXT PRIMARY KEY,
    task_id      TEXT,
    task_row     TEXT,                       -- JSON: the full task row (NULL for the authors' traces)
    config       TEXT NOT NULL DEFAULT '{}', -- JSON: the trace's config (never an API key)
    agents       TEXT NOT NULL DEFAULT '',   -- the persona spec string, e.g. "imap,imap,dsm-welfare"
    settings_key TEXT NOT NULL DEFAULT '',   -- agents + settings, for --resume
    status       TEXT NOT NULL DEFAULT 'running'
                 CHECK (status IN ('running', 'completed', 'stopped', 'failed')),
    started_at   TEXT,
    ended_at     TEXT,
    final_state  TEXT,                       -- JSON
    metrics      TEXT                        -- JSON
);
CREATE INDEX games_by_settings ON games (settings_key, status);

CREATE TABLE events (
    game_id   TEXT NOT NULL REFERENCES games (game_id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    type      TEXT NOT NULL,
    timestamp TEXT,
    round     INTEGER,
    agent_id  INTEGER,
    data      TEXT NOT NULL,                 -- JSON: the event's data (round, turn, phase, agent_id, ...)
    PRIMARY KEY (game_id, seq)
);

-- migration 2: per-seat results, where a game came from, headline numbers for listings
ALTER TABLE games ADD COLUMN cost_mode TEXT;
ALTER TABLE games ADD COLUMN source TEXT NOT NULL DEFAULT 'calbench';   -- calbench | authors
ALTER TABLE games ADD COLUMN calbench_version TEXT;
ALTER TABLE games ADD COLUMN coordination REAL;   -- metrics.coordination_rate
ALTER TABLE games ADD COLUMN excess_cost REAL;    -- mean per-seat excess cost
ALTER TABLE games ADD COLUMN extra TEXT;          -- JSON: other top-level trace keys (suite_version, ...)
CREATE INDEX games_by_task ON games (task_id);

CREATE TABLE seat_results (
    game_id             TEXT NOT NULL REFERENCES games (game_id) ON DELETE CASCADE,
    agent_id            INTEGER NOT NULL,
    persona             TEXT,
    model               TEXT,
    meetings_assigned   INTEGER,
    meetings_scheduled  INTEGER,
    success             REAL,
    cost                REAL,      -- cost levels (1/2/3)
    cost_shown          REAL,      -- shown units (1/10/100 or the authors' values)
    oracle_cost         REAL,
    oracle_cost_shown   REAL,
    excess              REAL,
    excess_shown        REAL,
    signed_excess       REAL,
    signed_excess_shown REAL,
    adjusted_cost       REAL,
    fairness            REAL,
    messages_sent       INTEGER,
    messages_received   INTEGER,
    messages_per_meeting REAL,
    vps                 REAL,
    data                TEXT,      -- JSON: the whole per-seat record
    PRIMARY KEY (game_id, agent_id)
);

-- migration 3: imported traces that do not verify, and leases on the tasks a run plays
-- verification: NULL for games played here (the engine wrote them), 'verified' or
-- 'unverified' for imported traces (fold, state hashes and metrics recomputed on import).
-- Reports leave 'unverified' games out unless asked for.
ALTER TABLE games ADD COLUMN verification TEXT
    CHECK (verification IS NULL OR verification IN ('verified', 'unverified'));
ALTER TABLE games ADD COLUMN verification_problems TEXT;   -- JSON list of plain-words problems

-- One row per task of a suite a run has claimed: a run claims a task before playing it, a
-- live claim of another process is respected, a stale one (its process gone) is taken
-- over.  unit = "<task_id>#<occurrence in the suite>".
CREATE TABLE claims (
    settings_key TEXT NOT NULL,
    unit         TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    game_id      TEXT,                       -- the id the game will be saved under
    owner        TEXT NOT NULL,              -- "<host>:<pid>:<process start time>"
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    run_pid      INTEGER,                    -- the run's parent process (workers are forked)
    claimed_at   TEXT NOT NULL,
    PRIMARY KEY (settings_key, unit)
);

-- migration 4: pilot studies: participants, their steps, answers, beliefs and timings
-- (lab/study; one row per participant and step; games stay in `games`, linked by game_id)
CREATE TABLE study_participants (
    study_id        TEXT NOT NULL,
    participant     TEXT NOT NULL,               -- a pseudonymous id given by the researcher
    slot            INTEGER NOT NULL,            -- arrival number (counterbalancing row)
    simulated       INTEGER NOT NULL DEFAULT 0,  -- 1 = a scripted participant (study check --dry-run)
    assignment      TEXT NOT NULL,               -- JSON: the planned games
    design_hash     TEXT,                        -- hash of the study file when the participant started
    status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed')),
    started_at      TEXT,
    completed_at    TEXT,
    completion_code TEXT,
    PRIMARY KEY (study_id, participant)
);
CREATE UNIQUE INDEX study_participant_slots ON study_participants (study_id, simulated, slot);

CREATE TABLE study_steps (
    study_id     TEXT NOT NULL,
    participant  TEXT NOT NULL,
    step         INTEGER NOT NULL,               -- 0, 1, 2, ... in the participant's plan
    name         TEXT NOT NULL,                  -- consent | instructions | quiz | questionnaire:ID | game:K | thanks
    game_id      TEXT,                           -- for game steps, once started
    started_at   TEXT,
    completed_at TEXT,
    seconds      REAL,                           -- wall time spent on the step (summed over resumes)
    data         TEXT,                           -- JSON: step details (quiz retries, game status, ...)
    PRIMARY KEY (study_id, participant, step),
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);

CREATE TABLE study_answers (
    study_id      TEXT NOT NULL,
    participant   TEXT NOT NULL,
    step          INTEGER NOT NULL,
    questionnaire TEXT NOT NULL,                 -- a questionnaire id, or 'quiz'
    item          TEXT NOT NULL,
    response      TEXT,
    attempt       INTEGER NOT NULL DEFAULT 1,    -- quiz: 1 = first try
    correct       INTEGER,                       -- quiz only
    game_id       TEXT,                          -- after_game questionnaires
    answered_at   TEXT,
    PRIMARY KEY (study_id, participant, step, item, attempt),
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);

CREATE TABLE study_beliefs (
    study_id    TEXT NOT NULL,
    participant TEXT NOT NULL,
    game_id     TEXT NOT NULL,
    round       INTEGER NOT NULL,
    observer    INTEGER NOT NULL,                -- the participant's seat
    target      INTEGER NOT NULL,
    slot        INTEGER NOT NULL,
    belief      INTEGER NOT NULL CHECK (belief BETWEEN -3 AND 3),   -- -3 surely busy .. +3 surely free
    recorded_at TEXT,
    PRIMARY KEY (study_id, participant, game_id, round, target, slot),
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);

CREATE TABLE study_timings (
    study_id    TEXT NOT NULL,
    participant TEXT NOT NULL,
    game_id     TEXT NOT NULL,
    round       INTEGER,
    turn        INTEGER,
    phase       TEXT NOT NULL,                   -- talk | voluntary | decision | beliefs
    seconds     REAL NOT NULL,
    timed_out   INTEGER NOT NULL DEFAULT 0,
    recorded_at TEXT,
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);
CREATE INDEX study_timings_by_participant ON study_timings (study_id, participant);

-- migration 5: finished games' events as one compressed, lean blob
-- (codec 'lean-zstd': zstd over JSON [[seq, type, timestamp, data, dropped], ...] where
-- data leaves out the calendar renders and copies folding rebuilds exactly, engine/lean.py;
-- 'json-zstd': the same without leaving anything out, for traces with no task row).  Games
-- in play, and stopped ones, keep one row per event in `events`.
CREATE TABLE event_blobs (
    game_id   TEXT PRIMARY KEY REFERENCES games (game_id) ON DELETE CASCADE,
    codec     TEXT NOT NULL,
    events    INTEGER NOT NULL,     -- how many events
    last_seq  INTEGER,
    data      BLOB NOT NULL
);

-- migration 6: study participants who left for good (declined consent, screened out by the
-- quiz) and the id an online pool gave them; a counterbalancing slot is no longer unique: a
-- slot given up (declined, screened out, withdrawn, stalled) is taken by the next arrival
ALTER TABLE study_participants ADD COLUMN outcome TEXT
    CHECK (outcome IS NULL OR outcome IN ('declined', 'screened_out'));   -- final; status stays 'active'
ALTER TABLE study_participants ADD COLUMN pool_id TEXT;                  -- e.g. a Prolific id from the link
DROP INDEX study_participant_slots;
CREATE INDEX study_participants_by_slot ON study_participants (study_id, simulated, slot);

-- migration 7: study data nothing a participant does can reset or blur: a belief-grid cell
-- left blank is NULL (missing), not 0 ("no idea"); the turn in progress when the participant
-- quit is timed too (partial = 1); what they wrote but had not sent at the quit is kept
CREATE TABLE study_beliefs_v7 (
    study_id    TEXT NOT NULL,
    participant TEXT NOT NULL,
    game_id     TEXT NOT NULL,
    round       INTEGER NOT NULL,
    observer    INTEGER NOT NULL,                -- the participant's seat
    target      INTEGER NOT NULL,
    slot        INTEGER NOT NULL,
    belief      INTEGER CHECK (belief IS NULL OR belief BETWEEN -3 AND 3),   -- NULL = left blank
    recorded_at TEXT,
    PRIMARY KEY (study_id, participant, game_id, round, target, slot),
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);
INSERT INTO study_beliefs_v7 SELECT study_id, participant, game_id, round, observer, target, slot, belief,
    recorded_at FROM study_beliefs;
DROP TABLE study_beliefs;
ALTER TABLE study_beliefs_v7 RENAME TO study_beliefs;
ALTER TABLE study_timings ADD COLUMN partial INTEGER NOT NULL DEFAULT 0;   -- 1 = the call was cut short by a quit
CREATE TABLE study_drafts (
    study_id    TEXT NOT NULL,
    participant TEXT NOT NULL,
    game_id     TEXT NOT NULL,
    round       INTEGER,
    kind        TEXT NOT NULL CHECK (kind IN ('queued', 'composer')),  -- queued to send, or still being typed
    channel     TEXT,
    recipients  TEXT,                            -- '|'-separated seats (a queued message)
    text        TEXT NOT NULL,
    recorded_at TEXT,
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);
CREATE INDEX study_drafts_by_participant ON study_drafts (study_id, participant);

-- migration 8: a third way of leaving for good, timed_out (over an online pool's time limit,
-- [pool] time_limit_minutes), and the pool's ids found fast (the public study link looks a
-- pool id up before it admits anyone).  The outcome column is rebuilt for its new CHECK.
ALTER TABLE study_participants ADD COLUMN outcome_v8 TEXT
    CHECK (outcome_v8 IS NULL OR outcome_v8 IN ('declined', 'screened_out', 'timed_out'));
UPDATE study_participants SET outcome_v8 = outcome;
ALTER TABLE study_participants DROP COLUMN outcome;
ALTER TABLE study_participants RENAME COLUMN outcome_v8 TO outcome;
CREATE INDEX study_participants_by_pool_id ON study_participants (study_id, pool_id);

-- migration 9: a questionnaire's written answer kept as it is typed, like the unsent words of a
-- game (study_drafts): a quit leaves it here, the resumed questionnaire puts it back in the box,
-- and the answer, once given, takes its place (its draft row is deleted with the answer stored).
CREATE TABLE study_answer_drafts (
    study_id      TEXT NOT NULL,
    participant   TEXT NOT NULL,
    step          INTEGER NOT NULL,
    questionnaire TEXT NOT NULL,
    item          TEXT NOT NULL,
    game_id       TEXT,                          -- the game an after-game questionnaire is about
    text          TEXT NOT NULL,
    recorded_at   TEXT,
    PRIMARY KEY (study_id, participant, step, questionnaire, item),
    FOREIGN KEY (study_id, participant) REFERENCES study_participants (study_id, participant) ON DELETE CASCADE
);

-- migration 10: a finished game's failed seat calls by class, {"infra", "configuration", "agent"}
-- (engine.usage.failure_counts), so that --resume reads them without the events: a game whose
-- endpoint failed (infra > 0) is set aside and played again, and a resumed suite's failure
-- counts cover the games it did not play again.  NULL for games saved before, and imports.
ALTER TABLE games ADD COLUMN failures TEXT;
