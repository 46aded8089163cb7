"""What ``calbench serve`` checks and runs (no Textual, no printing): one table whose human
seats are played from elsewhere, or a study's participants served in the browser.

``calbench_cli/commands/serve.py`` turns its options into the arguments of these calls and
prints what they return:

* :func:`check_limits` — the address, port, per-address sessions, public URL and time limits;
* :func:`plan_table` — a new table (task, seats, rules, lobby fill) or a stopped one to
  continue (``lab.gamespec.load_resume``, served games only), as a :class:`TablePlan`;
* :func:`serve_table` — the store opened, the :class:`lab.table.Table` and its
  :class:`lab.server.TableServer` (with the browser front the caller makes, if any), the
  game played until it ends or a signal stops it, the participants given time to read the
  end screen, everything closed: a :class:`ServeResult`;
* :func:`serve_until_stopped` — a server with no table (a study's browser front) until a signal.

The browser front itself (``calbench_tui.web.WebFront``) is the interface's: the caller
passes a function that makes it.  Every refusal is a :class:`lab.gamespec.SetupError` of
one line.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlsplit

from engine import protocols
from engine.game import GameConfig
from engine.model import Task

from .gamespec import SetupError

__all__ = ["ServeLimits", "TablePlan", "ServeResult", "check_limits", "plan_table", "serve_table",
           "serve_until_stopped", "lobby_fill"]

#: what ``--lobby-fill`` takes besides a scripted persona
CANCEL = "cancel"
SCRIPTED_ONLY = "--lobby-fill takes a scripted persona ({names}) or 'cancel'"


@dataclass(frozen=True)
class ServeLimits:
    """Where to listen and how long to wait (seconds), checked by :func:`check_limits`."""

    host: str = "127.0.0.1"
    port: int = 8700
    public_url: str | None = None  # normalised: ends in "/"
    max_sessions_per_address: int = 8
    send_timeout: float = 15.0
    hold: float = 120.0
    lobby_wait: float = 600.0
    linger: float = 300.0
    turn_seconds: float = 0.0  # a human seat's time for one request (0: no limit)


def check_address(host: str, port: int, max_sessions_per_address: int | None, public_url: str | None) -> str | None:
    """The address options checked; the public URL normalised (ending in ``/``), or None."""
    if not host.strip():  # aiohttp would listen on every interface
        raise SetupError("--host needs an address: 127.0.0.1 (this machine, the default) or 0.0.0.0 (the network)")
    if not 0 <= port <= 65535:
        raise SetupError(f"--port must be 0..65535, not {port}")
    if max_sessions_per_address is not None and not 1 <= max_sessions_per_address <= 10000:
        raise SetupError(f"--max-sessions-per-address must be 1..10000, not {max_sessions_per_address}")
    if public_url is None:
        return None
    parts = urlsplit(public_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise SetupError(f"--public-url {public_url!r} is not a web address; e.g. https://lab.example.org/")
    return public_url.strip().rstrip("/") + "/"


def check_limits(limits: ServeLimits) -> ServeLimits:
    """Every limit checked (one line each); the same limits with the public URL normalised."""
    public = check_address(limits.host, limits.port, limits.max_sessions_per_address, limits.public_url)
    if not 0.1 <= limits.send_timeout <= 3600:
        raise SetupError(f"--send-timeout must be 0.1..3600 seconds, not {limits.send_timeout:g}")
    for name in ("hold", "lobby_wait", "linger", "turn_seconds"):
        v = getattr(limits, name)
        if not 0 <= v <= 86400:
            raise SetupError(f"--{name.replace('_', '-')} must be 0..86400 seconds, not {v:g}")
    return ServeLimits(**{**limits.__dict__, "public_url": public})


def lobby_fill(raw: str) -> str | None:
    """The scripted persona that takes the seats nobody took in time, or None (``cancel``)."""
    from personas.spec import SeatSpec

    if raw.strip().lower() == CANCEL:
        return None
    seat = SeatSpec.parse(raw)
    if seat.kind != "scripted":
        from personas.spec import PASSIVE

        raise SetupError(SCRIPTED_ONLY.format(names=", ".join((*protocols.seat_names(variants=False), PASSIVE))))
    return seat.name


# ---------------------------------------------------------------------------------------
# the table: what is played
# ---------------------------------------------------------------------------------------
@dataclass
class TablePlan:
    """What a table plays: a new game, or (``resume_id``) a stopped one from its last complete round."""

    task: Task
    names: list[str]  # one persona name per seat; "human" seats are played remotely
    config: GameConfig
    fill: str | None  # the lobby fill persona, None: cancel
    resume_id: str | None = None
    resume_upto: int | None = None
    saved_llm: dict[int, Any] = field(default_factory=dict)  # seat -> the LLM settings it was saved with


def plan_table(*, agents: str | None, task_ref: str | None, resume: str | None, db: str, fill: str,
               channels: Sequence[str] | None = None, max_turns: int = 15) -> TablePlan:
    """A table to serve: ``resume`` (a saved served game in ``db``), else ``agents`` and ``task_ref``."""
    if resume:
        if agents or task_ref:
            raise SetupError("--resume continues a saved table with its own seats and task; drop --agents / --task")
        return _resumed(resume, db, lobby_fill(fill))
    if not agents or not task_ref:
        raise SetupError("give --agents SPEC and --task REF (one table), or --study PATH (a study's participants)")
    return _new_table(agents, task_ref, fill, channels or ("dm",), max_turns)


def _resumed(ref: str, db: str, fill: str | None) -> TablePlan:
    """Only a game played at a table is continued here, and only when no live process owns
    it (``lab.gamespec.load_resume``); its human seats get new join codes."""
    from .gamespec import load_resume
    from saves.store import StoreError, on_store

    if db != ":memory:" and not db.startswith("file:") and not os.path.exists(os.path.expanduser(db)):
        raise SetupError(f"no save database at {db}; give --db PATH")
    try:
        r = on_store(db, lambda store: load_resume(store, ref, served=True))
    except StoreError as exc:
        raise SetupError(str(exc)) from None
    if len(r.agents) != r.task.num_agents or "human" not in r.agents:
        raise SetupError(f"game {r.game_id[:8]} has no human seat to serve")
    return TablePlan(r.task, r.agents, r.config, fill, resume_id=r.game_id, resume_upto=r.upto, saved_llm=r.llm)


def _new_table(agents: str, task_ref: str, fill: str, channels: Sequence[str], max_turns: int) -> TablePlan:
    from personas.spec import PersonaSpecError

    from .gamespec import game_config, resolve_task
    from .runner import agents_of

    try:
        task = resolve_task(task_ref)
    except SetupError as exc:
        raise SetupError(f"--task {exc}" if str(exc).startswith("'") else str(exc)) from None
    try:
        seats = agents_of(agents).for_seats(task.num_agents)  # the lab's one parse of an agents spec
    except PersonaSpecError as exc:
        raise SetupError(str(exc)) from None
    if not any(s.kind == "human" for s in seats):
        raise SetupError("--agents has no 'human' seat to serve; e.g. human,imap,human,imap,imap")
    if any(s.bare_llm for s in seats):
        raise SetupError("a bare 'llm' seat needs a model: name it llm:MODEL")
    return TablePlan(task, [s.name for s in seats], game_config(max_turns=max_turns, channels=channels),
                     lobby_fill(fill))


# ---------------------------------------------------------------------------------------
# serving
# ---------------------------------------------------------------------------------------
@dataclass
class ServeResult:
    """How a table ended: ``status`` is the game's (completed / stopped / failed), ``cancelled``
    (the lobby was not filled in time), or ``interrupted`` (a signal stopped the server; then
    ``table_status`` says where the table was: stopped, over, or not started)."""

    game_id: str
    status: str
    error: str | None = None
    table_status: str | None = None

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "interrupted": 130}.get(self.status, 1)


async def _until_signal(work: Awaitable[Any]) -> Any:
    """``await work``, cancelled by SIGINT or SIGTERM (the handlers removed afterwards)."""
    me = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, me.cancel)
    try:
        return await work
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _start(server: Any, host: str, port: int) -> None:
    try:
        await server.start()
    except OSError as exc:
        raise SetupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


async def _linger(server: Any, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while server.connections > 0 and loop.time() < end:
        await asyncio.sleep(0.5)


def serve_table(plan: TablePlan, *, db: str, limits: ServeLimits, llm: Any = None,
                per_seat: Mapping[int, Any] | None = None, make_web: Callable[[Any], Any] | None = None,
                on_ready: Callable[[Any, Any], None] | None = None,
                on_takeover: Callable[[int, str], None] | None = None,
                on_end: Callable[[ServeResult], None] | None = None,
                on_event: Callable[[str], None] | None = None) -> ServeResult:
    """Serve one table until its game ends (then linger) or a signal stops it.

    ``llm`` / ``per_seat``: the LLM settings of the table's LLM seats (a resumed table's
    seats get the settings they were saved with); their pools are closed at the end.
    ``make_web(table)``: the browser front (with ``add_routes``, ``sessions``, ``table_url``),
    or None for terminals only; ``on_ready(server, table)`` once it listens (the join
    information); ``on_end(result)`` when the game ended, before the lingering;
    ``on_event(line)`` for the host's console (seats joining and leaving, the game's start,
    turns that ran out)."""
    seats = {**(per_seat or {}), **plan.saved_llm}
    return asyncio.run(_serve_table(plan, db=db, limits=limits, llm=llm, per_seat=seats, make_web=make_web,
                                    on_ready=on_ready, on_takeover=on_takeover, on_end=on_end, on_event=on_event))


async def _serve_table(plan: TablePlan, *, db, limits: ServeLimits, llm, per_seat, make_web, on_ready, on_takeover,
                       on_end, on_event=None) -> ServeResult:
    from engine.gameid import game_id
    from personas.registry import make_personas
    from saves.store import Store, StoreError

    from .gamespec import close_pools
    from .server import ServerLimits, TableServer
    from .table import Table

    def make_persona(name: str, seat: int):
        return make_personas(name, 1, llm=per_seat.get(seat, llm))[0]

    try:
        store = await Store.open(db)
    except StoreError as exc:
        raise SetupError(str(exc)) from None
    started = lease = None
    try:
        gid = plan.resume_id or game_id("calbench-serve", deterministic=False)
        if plan.resume_id:
            lease = await _hold_before_codes(store, gid)
        table = Table(plan.task, plan.names, plan.config, game_id=gid, store=store, resume_upto=plan.resume_upto,
                      hold_seconds=limits.hold, lobby_wait=limits.lobby_wait, lobby_fill=plan.fill,
                      extra_config={"app": "calbench-serve"}, make_persona=make_persona, on_takeover=on_takeover,
                      send_timeout=limits.send_timeout, turn_seconds=limits.turn_seconds or None,
                      on_event=on_event)
        web = make_web(table) if make_web is not None else None
        server = TableServer([table], host=limits.host, port=limits.port,
                             limits=ServerLimits(send_timeout=limits.send_timeout),
                             extra_routes=web.add_routes if web is not None else None)
        if web is not None:  # --linger waits for browser sessions too, not only the table's sockets
            server.extra_connections = lambda: web.sessions
        await _start(server, limits.host, limits.port)
        started = server
        if web is not None:
            web.table_url = server.url  # known only now when --port 0 picked a free port
        if on_ready is not None:
            on_ready(server, table)
        try:
            return await _until_signal(_play(table, server, limits.linger, on_end))
        except asyncio.CancelledError:
            return ServeResult(table.game_id, "interrupted", table_status=table.status)
    finally:
        if lease is not None:
            await lease.release()
        if started is not None:
            await started.stop()
            await store.close()
            await close_pools(llm, *per_seat.values())
        else:
            await store.close()


async def _hold_before_codes(store: Any, gid: str) -> Any:
    """A resumed table takes its game's lease before it hands out a join code: a second
    ``serve --resume`` of the same game while the first is live is refused in one line
    (exit 2) before anyone is given a code to a game that cannot be played twice.  The
    session takes the same lease again when play starts (same process: kept)."""
    from saves.lease import LeaseHeld

    from .lease import hold_game

    lease = hold_game(store, gid, "serve")
    try:
        return await lease.acquire()
    except LeaseHeld as exc:
        raise SetupError(f"cannot serve it: {exc}") from None


async def _play(table: Any, server: Any, linger: float, on_end) -> ServeResult:
    from saves.lease import LeaseHeld

    try:
        outcome = await table.run()
    except LeaseHeld as exc:  # another live process plays this game: nothing was written
        raise SetupError(f"cannot serve it: {exc}") from None
    if outcome is None:
        result = ServeResult(table.game_id, "cancelled")
    else:
        result = ServeResult(table.game_id, outcome.status, error=outcome.error)
    if on_end is not None:
        on_end(result)
    if outcome is not None:
        await _linger(server, linger)
    return result


def serve_until_stopped(server: Any, *, host: str, port: int, on_ready: Callable[[Any], None]) -> int:
    """Start ``server``, call ``on_ready(server)``, serve until SIGINT or SIGTERM; 130 then."""
    async def main() -> int:
        await _start(server, host, port)
        try:
            on_ready(server)
            await _until_signal(asyncio.Event().wait())
        except asyncio.CancelledError:
            return 130
        finally:
            await server.stop()
        return 0

    return asyncio.run(main())
