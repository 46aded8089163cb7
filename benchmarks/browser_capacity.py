"""How many browser participants one host serves: ``calbench serve --study`` under N at once.

    python benchmarks/browser_capacity.py [--n 10,20,40,60,80,100] [--typing S] [--keys text|help]
        [--study FILE] [--python PYTHON] [--chromium]

For each N a fresh ``calbench serve --study`` (its own database) is started with N participant
links; then N participants open their links at the same moment.  Light clients
(``calbench_devtools.page_client.PageClient``) speak the page's own websocket protocol;
``--chromium`` opens real pages in headless Chromium instead (Playwright, the browser found as
``chromium`` on PATH, reading the same websocket frames).

The study is the one ``calbench study init`` writes, with one free-text item added at the end
of its "before" questionnaire: that file has no free-text question before the games (its only
one, "Anything else you want to tell us?", is the study's last screen), so the added item
stands where a lab's first text question would be.  ``--study FILE`` takes another file; its
first free-text question must come before the first game.

With ``--keys text`` (the default) each participant walks the study's screens with keys, as a
person would, up to that first text question: ``y`` at consent, ``enter`` after the
instructions, each quiz question's right answer (its number key), and ``1`` (or an attention
check's right answer) for every choice or likert item before the text item; each key waits
until the next screen's words are painted.  When everyone is at the text question (or failed),
all type ordinary characters into it, one key a second for ``--typing`` seconds, each
participant at its own fixed phase within the second (as independent typists; ``--lockstep``:
all at the same moment, the worst case); each keystroke is timed until the text typed so far
is painted (the echo).  ``--keys help`` is the
old load: at consent, ``?`` once a second (the help opens and closes: a full-screen repaint),
each timed to the next screen update.  Printed per N:

* ``consent``: how many reached the consent screen, and the time by which all had;
* ``text q``: how many reached the first text question, and the time by which all had (also
  printed as ``text question: K of N by T s``; ``--keys text`` only);
* ``echo p95``: keystroke → echo while all type (ms); ``lost``: keystrokes whose echo did not
  come within 30 s;
* ``failed``: sessions that closed or never reached the screen they were walking to;
* ``cpu/participant``: CPU-seconds of the participants' app processes up to the screen where
  everyone waits before typing — the text question (``--keys text``) or consent (``--keys
  help``) — (``/proc/PID/stat``, utime + stime, summed over the host's descendants except the
  zygote, divided by N): the figure machine load inflates least;
* ``zygote``: the zygote's own CPU-seconds (paid once per server);
* ``rss``: the host and all its descendants' resident memory (MB; shared pages counted in
  each process, so an upper bound) and ``pss`` (proportional: shared pages split) when
  readable.

``--python`` runs the server with another interpreter (another checkout's venv: the
"before" of a change).  Every wait is bounded; nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from calbench_devtools.page_client import descendants, process_cmdline as cmdline, process_cpu as cpu_seconds, \
    process_parent as parent, screen_text  # noqa: E402

CLI = "import sys; from calbench_cli.cli import main; sys.exit(main())"
# the free-text item added to the init study's "before" questionnaire (see the docstring)
TEXT_ITEM = '{ id = "planning", text = "How do you usually find a time to meet?", type = "text" }'
ECHO_TIMEOUT = 30.0
WORDS = 28  # a screen's words waited for: the first characters of its question (a long one wraps)


def with_text_question(toml: str) -> str:
    """The init study's file with :data:`TEXT_ITEM` last in its "before" questionnaire."""
    at = toml.index('when = "before"')
    close = toml.index("\n]", toml.index("items = [", at))
    return toml[:close] + "\n  " + TEXT_ITEM + "," + toml[close:]


def walk(study) -> tuple[list[tuple[str, str]], str]:
    """The keys from a fresh link to the study's first free-text question: ``[(words, key)]``,
    each key pressed once ``words`` are painted, and the text question's own words."""
    def words(text: str) -> str:
        return " ".join(text.split())[:WORDS]

    steps = [("I agree", "y"), ("Instructions", "\r")]
    steps += [(words(q.question), str(q.answer + 1)) for q in study.quiz]
    for q in study.questionnaires_at("before"):
        for it in q.items:
            if it.type == "text":
                return steps, words(it.text)
            if it.type == "choice":
                k = (it.answer or 0) + 1
            else:
                k = it.answer or 1
            steps.append((words(it.text), "0" if k == 10 else "-" if k == 11 else str(k)))
    raise SystemExit("the study has no free-text question before its first game (see --study)")


def typed(i: int, n: int) -> str:
    """What participant ``i`` has typed after ``n`` keys: letters, first an upper-case Q (a
    character the empty box's placeholder does not hold), the rest drawn from ``i``'s seed."""
    rng = random.Random(i)
    return ("Q" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPRSTUVWXYZ") for _ in range(n)))[:n]


def phase(i: int, stagger: bool) -> float:
    """Seconds participant ``i`` waits before its first key once everyone is at the text
    question: a fixed draw in [0, 1) from ``i``'s seed, so the N typists' keys spread over
    each second as independent people's do (``--lockstep``: 0, every key of a second at once)."""
    return random.Random(f"phase:{i}").random() if stagger else 0.0


def echo_words(value: str) -> str:
    """What to wait for after a key: the text so far (its end once it is long: the box scrolls)."""
    return value[-20:]


def memory_mb(pids: list[int]) -> tuple[float, float | None]:
    rss, pss, pss_ok = 0, 0, True
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
        except OSError:
            pass
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pss_ok = False
    return rss / 1024, (pss / 1024 if pss_ok else None)


def start_server(python: str, workdir: Path, study: Path, n: int) -> tuple[subprocess.Popen, dict]:
    db = workdir / f"study-{n}-{time.time_ns()}.db"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TEXTUAL_ANIMATIONS": "none"}
    proc = subprocess.Popen([python, "-c", CLI, "serve", "--study", str(study), "--participants", str(n),
                             "--port", "0", "--json", "--db", str(db), "--max-sessions-per-address", "10000"],
                            stdout=subprocess.PIPE, stderr=open(workdir / f"serve-{n}.err", "w"), text=True, env=env,
                            cwd=workdir)  # (not this checkout: --python's own code runs)
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the server printed nothing; see {workdir}/serve-{n}.err")
    return proc, json.loads(line)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Barrier:
    """Everyone at a screen (or failed): ``arrive()`` once per participant; ``wait()`` until all have."""

    def __init__(self, n: int, then=None) -> None:
        self.n, self.count, self.then = n, 0, then
        self.all = asyncio.Event()

    def arrive(self) -> None:
        self.count += 1
        if self.count == self.n:
            if self.then is not None:
                self.then()
            self.all.set()

    async def wait(self) -> None:
        await self.all.wait()


def _result() -> dict:
    return {"consent": None, "text": None, "echo": [], "lost": 0, "failed": False}


async def walk_and_type(i: int, plan, out: dict, t0: float, at_text: Barrier, typing_s: float, timeout: float,
                        stagger: bool, *, press, size, wait, closed) -> None:
    """One participant's walk by keys to the text question, then its typing there, on a page
    driven by ``press(key)`` and read by ``size()`` (characters painted so far) and
    ``wait(words, since, limit)``; ``out["text"]`` is set when it arrives (and has arrived at
    the ``at_text`` barrier) — the light client and Chromium share this."""
    steps, question = plan
    for k, (_, key) in enumerate(steps):
        nxt = steps[k + 1][0] if k + 1 < len(steps) else question
        mark = size()
        await press(key)
        if not await wait(nxt, mark, timeout):
            out["failed"] = True
            return
    out["text"] = time.perf_counter() - t0
    at_text.arrive()
    await at_text.wait()
    await asyncio.sleep(phase(i, stagger))
    end = time.perf_counter() + typing_s
    n = 0
    while time.perf_counter() < end and not closed():
        await asyncio.sleep(1.0)
        n += 1
        value = typed(i, n)
        mark = size()
        sent = time.perf_counter()
        await press(value[-1])
        if await wait(echo_words(value), mark, ECHO_TIMEOUT):
            out["echo"].append(time.perf_counter() - sent)
        else:
            out["lost"] += 1


async def light_participant(i: int, ws_url: str, plan, keys: str, typing_s: float, timeout: float,
                            at_consent: Barrier, at_text: Barrier, stagger: bool = True) -> dict:
    """Open the link, reach consent, walk to the text question (``keys="text"``), wait for
    everyone, then type; or (``keys="help"``) wait for everyone at consent, then press ``?``."""
    from calbench_devtools.page_client import PageClient

    t0 = time.perf_counter()
    c = PageClient(ws_url)
    out = _result()
    consent_in = False
    steps = plan[0]
    try:
        await c.connect(timeout=timeout)
        if not await c.wait_for(steps[0][0], timeout=timeout):
            out["failed"] = True
            return out
        out["consent"] = time.perf_counter() - t0
        at_consent.arrive()
        consent_in = True
        end = None
        if keys == "help":
            await at_consent.wait()
            end = time.perf_counter() + typing_s
            while time.perf_counter() < end and not c.closed:  # "?" opens the help, "?" closes it
                await asyncio.sleep(1.0)
                await c.key("?", timed=True)
            out["echo"] = list(c.echoes)
            out["failed"] = c.closed
            return out
        await walk_and_type(i, plan, out, t0, at_text, typing_s, timeout, stagger, press=c.key,
                            size=lambda: len(c.text), closed=lambda: c.closed,
                            wait=lambda words, since, limit: c.wait_for(words, since=since, timeout=limit))
        out["failed"] = out["failed"] or c.closed
    except Exception:
        out["failed"] = True
    finally:
        if not consent_in:
            at_consent.arrive()
        if out["text"] is None:
            at_text.arrive()
        await c.close()
    return out


CHROMIUM_KEYS = {"\r": "Enter"}


async def chromium_run(links: list[str], plan, keys: str, typing_s: float, timeout: float,
                       at_consent: Barrier, at_text: Barrier, stagger: bool = True) -> list[dict]:
    from playwright.async_api import async_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("--chromium: no chromium on PATH")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    steps = plan[0]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, headless=True, args=flags)

        async def one(i: int, link: str) -> dict:
            out = _result()
            consent_in = False
            t0 = time.perf_counter()
            screen = {"text": "", "sent": None}
            changed = asyncio.Event()
            page = await browser.new_page(viewport={"width": 1100, "height": 700})

            def on_ws(ws):
                def frame(payload):
                    if not isinstance(payload, (bytes, bytearray)):
                        return  # the page's JSON (pong, ...): not the terminal's output
                    screen["text"] += screen_text(bytes(payload))
                    if screen["sent"] is not None:  # --keys help: the next update
                        out["echo"].append(time.perf_counter() - screen["sent"])
                        screen["sent"] = None
                    changed.set()
                ws.on("framereceived", frame)

            async def wait_for(words: str, since: int, limit: float) -> bool:
                end = time.perf_counter() + limit
                while words not in screen["text"][since:]:
                    if page.is_closed() or time.perf_counter() >= end:
                        return False
                    changed.clear()
                    try:
                        await asyncio.wait_for(changed.wait(), max(0.01, end - time.perf_counter()))
                    except TimeoutError:
                        pass
                return True

            page.on("websocket", on_ws)
            try:
                await page.goto(link, timeout=timeout * 1000)
                if not await wait_for(steps[0][0], 0, timeout):
                    out["failed"] = True
                    return out
                out["consent"] = time.perf_counter() - t0
                at_consent.arrive()
                consent_in = True
                if keys == "help":
                    await at_consent.wait()
                    end = time.perf_counter() + typing_s
                    while time.perf_counter() < end:
                        await asyncio.sleep(1.0)
                        screen["sent"] = time.perf_counter()
                        await page.keyboard.press("?")
                    return out
                await walk_and_type(i, plan, out, t0, at_text, typing_s, timeout, stagger,
                                    press=lambda key: page.keyboard.press(CHROMIUM_KEYS.get(key, key)),
                                    size=lambda: len(screen["text"]), wait=wait_for, closed=page.is_closed)
            except Exception:
                out["failed"] = True
            finally:
                if not consent_in:
                    at_consent.arrive()
                if out["text"] is None:
                    at_text.arrive()
                await page.close()
            return out

        results = await asyncio.gather(*(one(i, link) for i, link in enumerate(links)))
        await browser.close()
    return list(results)


async def run_one(python: str, workdir: Path, study: Path, plan, n: int, keys: str, typing_s: float,
                  timeout: float, chromium: bool, stagger: bool = True) -> dict:
    proc, info = start_server(python, workdir, study, n)
    try:
        await asyncio.sleep(3.0)  # the server (and its zygote, when it has one) comes up before the links open
        before = {p: cpu_seconds(p) for p in descendants(proc.pid)}
        links = [p["link"] for p in info["participants"]]
        base = info["web"].replace("http://", "ws://").rstrip("/")
        ws_urls = [f"{base}/ws/{p['code']}" for p in info["participants"]]
        t0 = time.perf_counter()
        cpu_at: dict[int, float] = {}
        done = asyncio.Event()

        async def sample():  # the app processes' CPU when everyone is at the screen they type on
            while not done.is_set():
                await asyncio.sleep(0.25)
                for p in descendants(proc.pid):
                    cpu_at[p] = cpu_seconds(p)

        def all_there() -> None:  # everyone there (or failed): the CPU to that screen
            for p in descendants(proc.pid):
                cpu_at[p] = cpu_seconds(p)
            done.set()

        sampler = asyncio.ensure_future(sample())
        at_consent = Barrier(n, all_there if keys == "help" else None)
        at_text = Barrier(n, all_there if keys == "text" else None)
        if chromium:
            results = await chromium_run(links, plan, keys, typing_s, timeout, at_consent, at_text, stagger)
        else:
            results = await asyncio.gather(*(light_participant(i, u, plan, keys, typing_s, timeout, at_consent,
                                                               at_text, stagger) for i, u in enumerate(ws_urls)))
        done.set()
        sampler.cancel()
        pids = descendants(proc.pid)
        rss, pss = memory_mb([proc.pid, *pids])
        zyg = [p for p in cpu_at if "calbench_tui.zygote" in cmdline(p) and parent(p) == proc.pid]
        apps = [p for p in cpu_at if p not in zyg]
        app_cpu = sum(cpu_at[p] - before.get(p, 0.0) for p in apps)
        echoes = sorted(e for r in results for e in r["echo"])
        reached = [r["consent"] for r in results if r["consent"] is not None]
        texts = [r["text"] for r in results if r["text"] is not None]
        return {"n": n, "keys": keys, "reached": len(reached), "all_by_s": max(reached) if len(reached) == n else None,
                "p50_consent_s": statistics.median(reached) if reached else None,
                "text_reached": len(texts), "text_by_s": max(texts) if texts else None,
                "text_all_by_s": max(texts) if len(texts) == n else None,
                "echo_p95_ms": 1000 * echoes[int(0.95 * (len(echoes) - 1))] if echoes else None,
                "echo_p50_ms": 1000 * statistics.median(echoes) if echoes else None,
                "echoes": len(echoes), "lost": sum(r["lost"] for r in results),
                "failed": sum(1 for r in results if r["failed"]),
                "cpu_per_participant_s": app_cpu / n, "zygote_cpu_s": sum(cpu_at[p] for p in zyg),
                "rss_mb": rss, "pss_mb": pss, "wall_s": time.perf_counter() - t0}
    finally:
        stop_server(proc)


def study_file(python: str, workdir: Path, given: str | None) -> tuple[Path, str]:
    """The study served, and how to name it: ``given``, or init's with :data:`TEXT_ITEM` added."""
    if given:
        return Path(given).resolve(), given
    init = workdir / "init.toml"
    subprocess.run([python, "-c", CLI, "study", "init", str(init)], check=True, capture_output=True, timeout=120,
                   cwd=workdir)
    study = workdir / "study.toml"
    study.write_text(with_text_question(init.read_text()))
    return study, "calbench study init's, one free-text item added to its 'before' questionnaire"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10,20,40,60,80,100", help="participant counts, comma-separated")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the server")
    ap.add_argument("--keys", choices=["text", "help"], default="text",
                    help="text: walk to the first text question and type into it; help: '?' at consent")
    ap.add_argument("--typing", type=float, default=15.0, help="seconds each participant types (one key a second)")
    ap.add_argument("--study", help="the study file (default: init's, one free-text item added; see the docstring)")
    ap.add_argument("--consent-timeout", type=float, default=300.0, help="bound on each wait for a screen (s)")
    ap.add_argument("--lockstep", action="store_true",
                    help="every participant types its key of each second at the same moment (default: each "
                         "at its own fixed phase within the second, as independent typists)")
    ap.add_argument("--chromium", action="store_true", help="real pages in headless Chromium (Playwright)")
    ap.add_argument("--json", action="store_true", help="one JSON line per N instead of the table")
    args = ap.parse_args()
    from lab.study.model import load_study

    loadavg = os.getloadavg()[0]
    print(f"# load average {loadavg:.1f} on {os.cpu_count()} cores; server python {args.python}", flush=True)
    with tempfile.TemporaryDirectory(prefix="calbench-capacity-") as tmp:
        study, name = study_file(args.python, Path(tmp), args.study)
        plan = walk(load_study(study))
        if args.keys == "text":
            print(f"# study: {name}; keys to the first text question ({plan[1]!r}): "
                  f"{' '.join(repr(k) for _, k in plan[0])}", flush=True)
        if not args.json:
            print(f"{'N':>4} {'consent':>9} {'all by s':>8} {'text q':>9} {'all by s':>8} {'echo p95':>9} "
                  f"{'lost':>5} {'failed':>6} {'cpu/part s':>10} {'zygote s':>8} {'rss MB':>7} {'pss MB':>7}",
                  flush=True)
        for n in [int(x) for x in args.n.split(",") if x.strip()]:
            r = asyncio.run(run_one(args.python, Path(tmp), study, plan, n, args.keys, args.typing,
                                    args.consent_timeout, args.chromium, not args.lockstep))
            if args.json:
                print(json.dumps(r), flush=True)
                continue

            def f(v, fmt):
                return "-" if v is None else format(v, fmt)

            text_q = f"{r['text_reached']:>4}/{n:<4}" if args.keys == "text" else f"{'-':>9}"
            print(f"{n:>4} {r['reached']:>4}/{n:<4} {f(r['all_by_s'], '8.1f')} {text_q} "
                  f"{f(r['text_all_by_s'], '8.1f')} {f(r['echo_p95_ms'], '9.0f')} {r['lost']:>5} "
                  f"{r['failed']:>6} {r['cpu_per_participant_s']:>10.2f} {r['zygote_cpu_s']:>8.2f} "
                  f"{r['rss_mb']:>7.0f} {f(r['pss_mb'], '7.0f')}", flush=True)
            if args.keys == "text":
                print(f"text question: {r['text_reached']} of {n} by {f(r['text_by_s'], '.1f')} s; echo p50 "
                      f"{f(r['echo_p50_ms'], '.0f')} ms, p95 {f(r['echo_p95_ms'], '.0f')} ms over {r['echoes']} "
                      f"keystrokes", flush=True)


if __name__ == "__main__":
    main()
