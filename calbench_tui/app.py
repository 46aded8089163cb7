"""The terminal app: play one seat of a CalBench game (``calbench-play``).

Architecture (DESIGN.md):

* ``make_app(store=..., seats=..., settings=..., task=...)`` builds the app — the command
  line and the tests use the same factory, so a test injects a temporary store, a fixed
  task and its own seats (Posting's ``make_posting()`` idea).
* The game is one :func:`lab.session.run_session` (the same session every driver uses)
  running in a Textual worker: it saves every event as it happens and passes it to an
  :class:`~calbench_tui.messages.AppSink` that posts what the human's seat may see as
  Textual messages.
* The human's seat is a :class:`personas.human.HumanPersona`: when the engine asks it
  something, it posts the request (with the seat's observation) and awaits a future the
  screens resolve.  The engine does not know a person is answering.
* Scripted and LLM seats answer inside the same worker; the interface never waits for
  them (an LLM call is an ``await`` on the network), and a slow or failing seat shows as
  such in the seats bar.
* ``ctrl+q`` quits at any moment: the worker is cancelled and the saved game is marked
  ``stopped``; ``--resume GAME`` continues it from its last complete round.
* The instructions (the help screen) open at the start of *every* game of a session — in
  a study each participant must get them, and a shared lab machine has one config folder —
  unless the player presses ``h`` on them (for this session only) or the experimenter
  starts the app with ``--no-intro``.  ``ctrl+p`` is the command palette: every action of
  the screen on top, by name.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any, Callable, Sequence

from rich.console import Console
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.worker import Worker

from engine import protocols
from engine.game import GameConfig
from engine.gameid import game_id
from engine.model import Task
from engine.seating import human_seat
from lab.gamespec import GameSpec, SetupError, game_config, load_resume, resolve_task, settings_key
from personas.human import HumanPersona, HumanRequest
from personas.seat_model import SeatModel
from personas.spec import AgentsSpec
from saves.lease import LeaseHeld

from .keys import ReadableKeys
from .messages import AppSink, GameEvent, GameFailed, GameOver, HumanTurn
from .screens.decision import DecisionScreen
from .screens.end import EndScreen
from .screens.game import GameScreen, talk_key_elsewhere
from .screens.help import HelpScreen
from .screens.setup import SetupScreen
from .settings import Settings

SeatsArg = Sequence[Any] | Callable[[Task, HumanPersona], Sequence[Any]] | None


class GameSetupError(Exception):
    """The game cannot start (no such task, no such persona); the message is one line."""


def binding_ids() -> list[str]:
    """Every remappable binding id (for keys.toml validation and the help screen)."""
    from .screens.games import SavedGamesScreen
    from .screens.replay import ReplayScreen
    from .screens.report import ReportScreen
    from .widgets.batch import BatchBuilder
    from .widgets.calendar import CalendarView

    ids: list[str] = []
    for cls in (CalBenchApp, GameScreen, DecisionScreen, EndScreen, SetupScreen, HelpScreen, CalendarView,
                BatchBuilder, SavedGamesScreen, ReplayScreen, ReportScreen):
        for b in cls.BINDINGS:
            if isinstance(b, Binding) and b.id and b.id not in ids:
                ids.append(b.id)
    return ids


def keymap_conflicts(keymap: dict[str, str]) -> list[str]:
    """Keys a remapping gives to two actions of one screen (its own bindings and the app's),
    one sentence each; empty when there are none.  Issue 35: the second action was silently
    unreachable."""
    from .screens.games import SavedGamesScreen
    from .screens.replay import ReplayScreen
    from .screens.report import ReportScreen
    from .widgets.batch import BatchBuilder
    from .widgets.calendar import CalendarView

    out: list[str] = []
    for cls in (GameScreen, DecisionScreen, EndScreen, SetupScreen, HelpScreen, CalendarView, BatchBuilder,
                SavedGamesScreen, ReplayScreen, ReportScreen):
        owner: dict[str, str] = {}
        for b in [*CalBenchApp.BINDINGS, *cls.BINDINGS]:
            if not isinstance(b, Binding) or not b.id:
                continue
            for key in {_key_id(k.strip()) for k in keymap.get(b.id, b.key).split(",")}:
                other = owner.setdefault(key, b.id)
                if other != b.id and (b.id in keymap or other in keymap):
                    line = f"{key!r} is bound to both {other!r} and {b.id!r} ({cls.__name__})"
                    if line not in out:
                        out.append(line)
    return out


def _key_id(key: str) -> str:
    """One spelling per key: a character as Textual names it (``?`` is ``question_mark``)."""
    from textual.keys import _character_to_key

    *mods, last = key.split("+") if key != "+" else ["+"]
    return "+".join([*mods, _character_to_key(last) if len(last) == 1 else last])


def binding_table() -> list[tuple[str, str, str]]:
    """(id, keys, description) of every remappable binding (``calbench-play --list-keys``)."""
    from .screens.games import SavedGamesScreen
    from .screens.replay import ReplayScreen
    from .screens.report import ReportScreen
    from .widgets.batch import BatchBuilder
    from .widgets.calendar import CalendarView

    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for cls in (CalBenchApp, GameScreen, DecisionScreen, EndScreen, SetupScreen, HelpScreen, CalendarView,
                BatchBuilder, SavedGamesScreen, ReplayScreen, ReportScreen):
        for b in cls.BINDINGS:
            if isinstance(b, Binding) and b.id and b.id not in seen:
                seen.add(b.id)
                out.append((b.id, b.key, b.description))
    return out


def screen_text(app: App) -> str:
    """The current screen as plain text (what a person would read), for tests and benchmarks."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False, safe_box=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console.print(update)
    return console.export_text(styles=False)


class CalBenchApp(ReadableKeys, App):
    TITLE = "CalBench"
    ENABLE_COMMAND_PALETTE = True
    COMMAND_PALETTE_BINDING = "ctrl+p"
    CSS = """
    Screen { background: $surface; }
    """

    BINDINGS = [
        Binding("ctrl+q", "quit_game", "Quit", id="quit", priority=True),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("ctrl+p", "command_palette", "Commands", id="palette", show=False),
    ]

    def __init__(self, *, settings: Settings, store: Any = None, seats: SeatsArg = None, task: Task | None = None,
                 llm: Any = None, store_path: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.store_path = store_path
        self._own_store = False
        self._seats_arg = seats
        self._given_task = task
        self.llm = llm
        self.human = HumanPersona(self._on_human_request)
        self.game_task: Task | None = None
        self.game_id: str | None = None
        self.status: str | None = None  # running | completed | stopped | failed
        self.result = None
        self.error: str | None = None
        self.game_screen: GameScreen | None = None
        self.seat_model: SeatModel | None = None  # the human seat's state; the game screen renders it
        self.decision_screen: DecisionScreen | None = None
        self.end_screen: EndScreen | None = None
        self.games_played = 0
        self.resume_trace: dict[str, Any] | None = None
        self._unsent: dict[str, Any] | None = None  # queued and typed words kept at the stop, put back on resume
        self._resume_llm: dict[int, Any] = {}  # seat -> LLMSettings restored from the saved game
        self.llm_per_seat: dict[int, Any] = {}  # seat -> LLMSettings of --personas (calbench-play)
        self.llm_overrides: dict[str, Any] | None = None  # LLM options typed again at --resume (they win)
        self._resume_nosy: tuple[int, ...] = ()
        self.resume_endpoints_checked = False  # calbench-play checked the saved game's LLM endpoints already
        self.intro_each_game = settings.show_help  # the instructions before every game (see the module doc)
        self.lobby_screen = None  # the waiting screen of a table served elsewhere
        if settings.keymap:
            self._keymap = self._normalize_keymap(settings.keymap)

    # -- lifecycle ----------------------------------------------------------------------
    async def on_mount(self) -> None:
        if self.store is None and self.store_path:
            from saves.store import Store

            self.store = await Store.open(self.store_path)
            self._own_store = True
        if self.settings.join:
            self._start_remote()
            return
        if self.settings.resume:
            try:
                await self._prepare_resume()
            except Exception as exc:  # no such game, completed, no human seat, bad database
                self.error = str(exc)
                self.exit(return_code=2)
                return
        if (self.settings.setup or self.settings.seat is None) and not self.settings.resume:
            self.push_screen(SetupScreen(self.settings, num_agents=self._given_task.num_agents if self._given_task else 5,
                                         llm_available=self.settings.llm_available), callback=self._setup_done)
        else:
            self.start_game()
        if not self.settings.resume and self.store is not None:
            self.run_worker(self._mention_stopped(), exit_on_error=False)

    async def _mention_stopped(self) -> None:
        """A player who quit a game and starts calbench-play again is told it can be continued
        (found by hand: a new game started without a word about the stopped one)."""
        try:
            games = await self.store.list_games(status="stopped")
        except Exception:  # noqa: BLE001 - a note, never a reason not to play
            return
        mine = [g for g in games if "human" in str(g.get("agents") or "").split(",")]
        if mine:
            import shlex

            cmd = ["calbench-play", "--resume", mine[-1]["game_id"][:8]]
            cmd += ["--db", str(self.store_path)] if self.store_path else []
            more = f" ({len(mine)} in all)" if len(mine) > 1 else ""
            self.notify(f"A game you stopped can be continued{more}: quit (ctrl+q) and run {shlex.join(cmd)}, "
                        "or open Saved games (g at the end of a game).", timeout=12)

    async def on_unmount(self) -> None:
        if self.status == "running":
            await self._stop_game()
        if self._own_store and self.store is not None:
            await self.store.close()

    def _setup_done(self, settings: Settings | None) -> None:
        if settings is None:
            self.exit()
            return
        self.settings = settings
        self._given_task = None
        self.start_game()

    # -- starting a game ----------------------------------------------------------------
    def resolve_task(self) -> Task:
        if self._given_task is not None:
            return self._given_task
        s = self.settings
        try:  # "seed:N" is a generated scenario: the costs apply (lab.gamespec.resolve_task)
            return resolve_task(s.task, cost=s.cost, seed=s.seed)
        except SetupError as exc:
            raise GameSetupError(str(exc)) from None

    def agents_spec(self, num_agents: int) -> str:
        """The persona spec string of this game, one entry per seat ("human" at the player's seat)."""
        return ",".join(self._seat_names(num_agents))

    def _seat_names(self, num_agents: int) -> list[str]:
        """One persona name per seat ("human" at the player's seat): ``--agents`` parsed here, once a game."""
        s = self.settings
        spec = AgentsSpec.parse(s.agents if s.agents and s.agents.strip() else protocols.default_seat())
        base = spec.seats * num_agents if len(spec.seats) == 1 else spec.seats
        if len(base) != num_agents:
            raise GameSetupError(f"--agents names {len(base)} seats but the task has {num_agents}")
        out = []
        for i in range(num_agents):
            if i == s.seat:
                out.append("human")
            else:
                fill = base[i].name if base[i].kind != "human" else protocols.default_seat()
                out.append(s.seat_personas.get(i, fill))
        return out

    def make_seats(self, task: Task) -> list[Any]:
        seat = self.settings.seat
        if seat is None or not 0 <= seat < task.num_agents:
            raise GameSetupError(f"seat {seat} does not exist: this task has seats 0-{task.num_agents - 1}")
        arg = self._seats_arg
        if callable(arg):
            seats = list(arg(task, self.human))
        elif arg is not None:
            seats = list(arg)
        else:
            from personas.registry import make_personas  # type: ignore

            spec = AgentsSpec.of_names(self._seat_names(task.num_agents))
            try:
                seats = list(make_personas(spec, task.num_agents, llm=self.llm, humans={seat: self.human}))
            except (ValueError, KeyError, TypeError, ImportError) as exc:
                raise GameSetupError(f"cannot seat {spec.label!r}: {exc}") from None
        if len(seats) != task.num_agents:
            raise GameSetupError(f"{len(seats)} personas for a task with {task.num_agents} seats")
        if self.llm_per_seat and not self._resume_llm:  # --personas: a seat's own model, endpoint, sampling
            from personas.llm.factory import make_llm_persona

            for i, st in self.llm_per_seat.items():
                if i != seat and i < len(seats) and getattr(seats[i], "kind", None) == "llm":
                    var = getattr(seats[i], "variant", None)
                    seats[i] = make_llm_persona(f"llm:{seats[i].model_name}" + (f"+{var}" if var else ""), st)
        if self._resume_llm:  # --resume: every LLM seat gets back the settings it was saved with
            from personas.llm.factory import make_llm_persona

            for i, st in self._resume_llm.items():
                if i != seat and i < len(seats):
                    seats[i] = make_llm_persona(f"llm:{st.model}", st)
        seats[seat] = self.human
        return seats

    def game_config(self) -> GameConfig:
        s = self.settings
        return game_config(max_turns=s.max_turns_per_round, retries=s.decision_retries, channels=s.channels,
                           deterministic=s.deterministic, nosy=self._resume_nosy)

    def start_game(self) -> None:
        try:
            task = self.resolve_task()
            seats = self.make_seats(task)
        except Exception as exc:  # a bad task or persona: say so, do not crash
            self.error = str(exc)
            self.notify(str(exc), severity="error", timeout=10)
            if self.game_screen is None:
                self.exit(return_code=2)
            return
        self.game_task = task
        self.human = seats[self.settings.seat]
        self.human.attach(self._on_human_request)
        self.seat_model = SeatModel(self.settings.seat, tuple(self.settings.channels), task.num_agents,
                                    num_rounds=len(task.meetings))
        self.game_screen = GameScreen(self.seat_model)
        self.push_screen(self.game_screen)
        if self.intro_each_game:
            self.push_screen(HelpScreen(intro=True))
        self.games_played += 1
        self.play(task, seats)

    def _new_game_id(self, task: Task, seats: list[Any]) -> str:
        if self.resume_trace is not None:
            return self.resume_trace["game_id"]
        return game_id("calbench-play", repr((
            task.task_id, task.seed, [getattr(s, "model", None) for s in seats], self.settings.seat,
            tuple(self.settings.channels), self.games_played)), deterministic=self.settings.deterministic)

    @work(exclusive=True, group="game", exit_on_error=False)
    async def play(self, task: Task, seats: list[Any]) -> None:
        """Play the game through :func:`lab.session.run_session` (streamed: every event saved as it happens).

        ``--resume`` continues the stopped game from its last complete round; the screen is
        first shown the kept events.  A failure is saved with its error text and traceback,
        like the suite runner's; ctrl+q cancels this worker and the session marks the game
        stopped.
        """
        config = self.game_config()
        spec = AgentsSpec.of_names(["human" if i == self.settings.seat else str(getattr(p, "model", None) or p.kind)
                                    for i, p in enumerate(seats)])  # the seats as made, named as saved before
        resume_upto = self.resume_trace["_keep_upto_seq"] if self.resume_trace is not None else None
        game = GameSpec(task, spec, config, self._new_game_id(task, seats),
                        settings_key({"app": "calbench-play", "agents": spec.label, "channels": list(config.channels),
                                      "max_turns": config.max_turns_per_round, "retries": config.decision_retries,
                                      "deterministic": config.deterministic}),
                        extra_config={"app": "calbench-play"}, human_seat=self.settings.seat,
                        logical_clock=self.settings.deterministic)  # (LLM seats' public settings: added by the spec)
        self.game_id = game.game_id
        self.status = "running"
        try:
            outcome = await game.play(seats, store=self.store, stream=True, listeners=[AppSink(self, self.settings.seat)],
                                      resume_upto=resume_upto, owner="calbench-play")
        except asyncio.CancelledError:
            raise  # ctrl+q: the session marked the game stopped (and _stop_game says so too)
        except LeaseHeld as exc:  # another process plays this game: nothing was written; one line
            self.status = None
            self.error = str(exc)
            self.exit(return_code=2)
            return
        except Exception as exc:  # the store itself failed: nothing more can be saved
            outcome = None
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = outcome.error
        if outcome is None or outcome.status == "failed":
            self.status = "failed"
            from engine.redact import redact

            self.error = redact(error) if error else error
            self.post_message(GameFailed(self.error or "unknown error"))
            return
        self.result = outcome.result
        self.resume_trace = None
        self.status = "completed"
        self.post_message(GameOver(outcome.result))

    # -- a table served elsewhere (calbench-play --join) ---------------------------------------
    def _start_remote(self, error: str | None = None) -> None:
        from .screens.lobby import JoinScreen

        if not self.settings.code:
            def got(code: str | None) -> None:
                if code:
                    self.settings = self.settings.with_(code=code)
                    self._start_remote()
            self.push_screen(JoinScreen(self.settings.join, error), callback=got)
            return
        from .remote import RemoteGame

        self.status = "running"
        game = RemoteGame(self, self.settings.join, self.settings.code, rejoin_seconds=self.settings.rejoin_seconds)
        self.run_worker(game.run(), group="game", exclusive=True, exit_on_error=False)

    def remote_welcome(self, frame: dict[str, Any]) -> None:
        """(Re)joined: a fresh game screen, rebuilt from the events the server replays next."""
        from .screens.lobby import LobbyScreen

        table = frame.get("table") or {}
        self.game_id = frame.get("game_id")
        if frame.get("took_over") and frame.get("message"):  # we took the seat from another window
            self.notify(str(frame["message"]), severity="warning", timeout=20)
        self.settings = self.settings.with_(seat=frame["seat"], channels=tuple(table.get("channels") or ("dm",)))
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.decision_screen = None
        self.seat_model = SeatModel(frame["seat"], self.settings.channels, table.get("num_agents", 5),
                                    num_rounds=table.get("num_rounds", 0))  # rebuilt from the replayed events
        self.game_screen = GameScreen(self.seat_model)
        self.push_screen(self.game_screen)
        if frame.get("status") == "lobby":
            self.lobby_screen = LobbyScreen(frame["seat"])
            self.push_screen(self.lobby_screen)
        if self.intro_each_game and not getattr(self, "_remote_intro_shown", False):
            self._remote_intro_shown = True  # once per table: a rejoin does not bring it back
            self.push_screen(HelpScreen(intro=True), callback=self._after_remote_intro)

    def _after_remote_intro(self, _result: Any = None) -> None:
        """The instructions were read over the lobby: if the table started meanwhile, the lobby
        (left under them) goes too."""
        from .screens.lobby import LobbyScreen

        if self.lobby_screen is None and isinstance(self.screen, LobbyScreen):
            self.pop_screen()

    def remote_lobby(self, frame: dict[str, Any]) -> None:
        """Who is at the table: the lobby's status before the game, the seats bar's "left" in play."""
        gs = self.game_screen
        if frame.get("status") != "lobby" and gs is not None:
            gs.deliver(gs.on_presence, [s for s in frame.get("waiting") or [] if isinstance(s, int)])
        lobby = self.lobby_screen
        if lobby is None:
            return
        if frame.get("status") != "lobby":
            self.lobby_screen = None
            if self.screen is lobby:
                self.pop_screen()
            # (under the instructions it is popped when they close: _after_remote_intro)
        else:
            lobby.show(frame)

    def remote_unreachable(self, message: str) -> None:
        """The first connection to the table failed: exit with the one-line reason (exit status 2)."""
        self.status = None
        self.error = message
        self.exit(return_code=2)

    def remote_taken_over(self, message: str) -> None:
        """Our seat was opened with the same code elsewhere: say so in words (not as an error)."""
        self.status = "stopped"
        self.error = message  # said again on the command line after the app closes
        self.notify(message, severity="warning", timeout=60)
        if self.game_screen is not None:
            self.game_screen.note(message)

    def remote_refused(self, message: str) -> None:
        """The table refused the code (ask again on the code screen), or took the seat away,
        was cancelled or stopped (the game stops, saying why)."""
        self.status = "stopped"
        if "unknown join code" in message:
            self.settings = self.settings.with_(code=None)
            while len(self.screen_stack) > 1:
                self.pop_screen()
            self._start_remote(error="That code does not open a seat here. Check it and try again.")
        else:
            self.error = message  # said again on the command line after the app closes
            self.post_message(GameFailed(message))

    # -- resume ---------------------------------------------------------------------------
    async def _prepare_resume(self) -> None:
        """Load a stopped game (``lab.gamespec.load_resume``): its task, seat, rules, each LLM
        seat's saved settings (every endpoint must answer) and the events of its complete rounds."""
        if self.store is None:
            raise GameSetupError("--resume needs a save database")
        try:  # a live lease is refused by the session itself (one line, nothing written)
            r = await load_resume(self.store, self.settings.resume, llm=self.llm, overrides=self.llm_overrides,
                                  check_endpoints=not self.resume_endpoints_checked, check_lease=False, served=False)
        except SetupError as exc:
            raise GameSetupError(str(exc)) from None
        finally:
            self.resume_endpoints_checked = False  # the command line checked them for its own --resume only
        seat = human_seat(r.cfg)
        if seat is None:
            raise GameSetupError(f"game {r.game_id} has no human seat; resume it with 'calbench run'")
        r.trace["_keep_upto_seq"] = r.upto  # the end of the last complete round
        self.resume_trace = r.trace
        kept = r.trace.get("unsent")
        self._unsent = kept if isinstance(kept, dict) and kept.get("seat") == seat else None
        self._given_task = r.task
        self._resume_llm = r.llm
        self._resume_nosy = tuple(r.config.nosy_agent_ids)
        self.settings = self.settings.with_(seat=seat, channels=tuple(r.config.channels), agents=",".join(r.agents),
                                            setup=False, max_turns_per_round=r.config.max_turns_per_round,
                                            decision_retries=r.config.decision_retries)

    # -- quitting -------------------------------------------------------------------------
    def _game_worker(self) -> Worker | None:
        for w in self.workers:
            if w.group == "game" and not w.is_finished:
                return w
        return None

    def _unsent_now(self) -> dict[str, Any] | None:
        """What the person has queued and typed but not sent, to keep over a stop (None: nothing)."""
        m, gs = self.seat_model, self.game_screen
        if m is None or gs is None or self.status != "running":
            return None
        queued, typed = m.outbox_json(), gs.typed()
        if not queued and not typed.strip():
            return self._unsent  # put back at the first request, which has not come yet: keep it still
        return {"seat": m.seat, "round": m.round, "queued": queued, "composer": typed}

    async def _stop_game(self) -> None:
        unsent = self._unsent_now()
        w = self._game_worker()
        if w is not None:
            w.cancel()
            try:
                await w.wait()
            except Exception:
                pass
        if self.status == "running":
            self.status = "stopped"
            if self.store is not None and self.game_id is not None:
                try:
                    await self.store.mark_status(self.game_id, "stopped")
                    await self.store.keep_unsent(self.game_id, unsent)
                except Exception:
                    pass

    async def action_quit_game(self) -> None:
        await self._stop_game()
        self.exit(return_code=0)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- the command palette, and talk keys pressed elsewhere -------------------------------------
    def get_system_commands(self, screen) -> Any:
        """The palette lists this app's actions only: every action bound on the screen on top,
        then help, the legend and quit (none of Textual's own: theme, screenshot, keys panel…)."""
        from .keys import screen_commands

        listed: set[str] = set()
        for title, help_text, node, action in screen_commands(self, screen):
            if node is self:
                continue
            listed.add(title)
            yield SystemCommand(title, help_text, self._runner(action, node))
        yield SystemCommand("Help", "key: ? — the instructions and every key", self.action_help)
        yield SystemCommand("What the numbers mean", "the legend of the end screen, the saved games and the report",
                            self.action_legend)
        yield SystemCommand("Quit", "key: ctrl+q — leave; a game in progress is saved as stopped",
                            self.action_quit_game)

    def on_key(self, event) -> None:
        """A key of the talk pressed on the batch builder or the end screen, where nothing is bound
        to it, says why it does nothing there (a silent key reads as a frozen game)."""
        screen = self.screen
        if self.game_screen is None or not isinstance(screen, (DecisionScreen, EndScreen)):
            return
        if event.key in screen.active_bindings:
            return  # a key of this screen: its binding runs
        why = talk_key_elsewhere(event.key, getattr(self, "_keymap", None), ended=isinstance(screen, EndScreen))
        if why:
            self.notify(why, severity="warning", timeout=5)

    def _runner(self, action: str, node: Any):
        async def run() -> None:
            await self.run_action(action, node)
        return run

    def action_legend(self) -> None:
        from .screens.legend import LegendScreen

        if not isinstance(self.screen, LegendScreen):
            self.push_screen(LegendScreen())

    # -- messages from the game ------------------------------------------------------------
    def _on_human_request(self, request: HumanRequest) -> None:
        self.post_message(HumanTurn(request))

    def on_human_turn(self, message: HumanTurn) -> None:
        req = message.request
        gs = self.game_screen
        if gs is None:
            return
        if req.kind != "register" and self._unsent is not None:  # --resume: the first question puts them back
            kept, self._unsent = self._unsent, None
            gs.deliver(gs.restore_unsent, kept)
        if req.kind == "register":
            gs.deliver(gs.on_register, req.obs)
        elif req.kind == "speak":
            gs.deliver(gs.on_speak, req)
        elif req.kind in ("volunteer", "decide"):
            gs.deliver(gs.on_batch_request, req)
            self.open_batch_builder(req)

    def on_game_event(self, message: GameEvent) -> None:
        if self.game_screen is not None:
            self.game_screen.deliver(self.game_screen.on_game_event, message.event)

    def on_game_over(self, message: GameOver) -> None:
        self._close_batch_builder()
        self.end_screen = EndScreen(message.result.trace, seat=self.settings.seat, game_id=message.result.game_id)
        self.push_screen(self.end_screen)

    def on_game_failed(self, message: GameFailed) -> None:
        self._close_batch_builder()
        self.notify(f"The game stopped: {message.error}", severity="error", timeout=30)
        if self.game_screen is not None:
            self.game_screen.note(f"The game stopped because of an error: {message.error}")

    # -- the batch builder ------------------------------------------------------------------
    def open_batch_builder(self, request: HumanRequest) -> None:
        if request is None or request.done:
            return
        self._close_batch_builder()
        m = self.seat_model
        self.decision_screen = DecisionScreen(request, suggested=m.agreed_slot() if m else None,
                                              talk=m.talked_slots() if m else [], apart=m.apart if m else ())
        self.push_screen(self.decision_screen)

    def on_game_screen_open_batch(self, message: GameScreen.OpenBatch) -> None:
        self.open_batch_builder(message.request)

    def _close_batch_builder(self) -> None:
        ds = self.decision_screen
        self.decision_screen = None
        if ds is not None and ds.is_attached and ds in self.screen_stack:
            if self.screen is ds:
                self.pop_screen()
            # (under another screen, e.g. help, it stays; once answered its keys do nothing)

    def on_decision_screen_answered(self, message: DecisionScreen.Answered) -> None:
        """The person's batch: the app answers the engine's request with it, and the builder
        goes (the game screen's keys follow the model, whose request is now answered)."""
        screen = message.screen
        message.request.answer(message.reply)
        if self.screen is screen:
            self.pop_screen()
        if self.decision_screen is screen:
            self.decision_screen = None

    # -- again ----------------------------------------------------------------------------
    def on_end_screen_play_again(self, _message: EndScreen.PlayAgain) -> None:
        self.play_again()

    def play_again(self) -> None:
        """The setup screen again, prefilled with this game's choices (the next seed), so the
        player sees what the next game will be before it starts."""
        if self.status == "running":
            return
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.game_screen = None
        self.end_screen = None
        self._given_task = None
        if not self.settings.task:
            self.settings = self.settings.with_(seed=None if self.settings.seed is None
                                                else self.settings.seed + 1)
        n = self.game_task.num_agents if self.game_task is not None else 5
        self.push_screen(SetupScreen(self.settings, num_agents=n, llm_available=self.settings.llm_available,
                                     again=True), callback=self._setup_done)

    def on_saved_games_screen_resume(self, message) -> None:
        self.run_worker(self.resume_saved(message.game_id), group="resume", exclusive=True, exit_on_error=False)

    async def resume_saved(self, game_id: str) -> bool:
        """Continue a stopped game picked in the saved-games list (as ``--resume`` does)."""
        if self.status == "running":
            self.notify("Finish or quit the game in progress first.", severity="warning")
            return False
        previous = self.settings
        self.settings = self.settings.with_(resume=game_id)
        try:
            await self._prepare_resume()
        except Exception as exc:
            self.settings = previous
            self.resume_trace = None
            self.notify(f"Cannot continue game {game_id[:8]}: {exc}", severity="error", timeout=10)
            return False
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.game_screen = None
        self.end_screen = None
        self.start_game()
        return True


def make_app(*, settings: Settings | None = None, store: Any = None, seats: SeatsArg = None,
             task: Task | None = None, llm: Any = None, store_path: str | None = None) -> CalBenchApp:
    """Build the app (the CLI and the tests use this factory)."""
    return CalBenchApp(settings=settings or Settings(seat=2), store=store, seats=seats, task=task, llm=llm,
                       store_path=store_path)
