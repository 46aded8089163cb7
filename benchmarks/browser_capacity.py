"""How many browser participants one host serves: ``calbench serve --study`` under N at once.

    python benchmarks/browser_capacity.py [--n 10,20,40,60,80,100] [--python PYTHON] [--chromium]

For each N a fresh ``calbench serve --study`` (the study ``calbench study init`` writes, its
own database) is started with N participant links; then N participants open their links
at the same moment.  Light clients (``calbench_devtools.page_client.PageClient``) speak the
page's own websocket protocol; ``--chromium`` opens real pages in headless Chromium instead
(Playwright, reading the same websocket frames).  Each participant waits for the consent
screen, agrees (``y``), and then types into the session (one key a second, each timed to the
next screen update).  Printed per N:

* ``consent``: how many reached the consent screen, and the time by which all had;
* ``echo p95``: keystroke → screen update while all type (ms);
* ``failed``: sessions that closed or never reached consent;
* ``cpu/participant``: CPU-seconds of the participants' app processes up to the consent
  screen (``/proc/PID/stat``, utime + stime, summed over the host's descendants except the
  zygote, divided by N) — the figure machine load inflates least;
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
    process_parent as parent  # noqa: E402


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


def start_server(python: str, workdir: Path, n: int) -> tuple[subprocess.Popen, dict]:
    study = workdir / "study.toml"
    if not study.exists():
        subprocess.run([python, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "study",
                        "init", str(study)], check=True, capture_output=True, timeout=120, cwd=workdir)
    db = workdir / f"study-{n}-{time.time_ns()}.db"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TEXTUAL_ANIMATIONS": "none"}
    proc = subprocess.Popen([python, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())",
                             "serve", "--study", str(study), "--participants", str(n), "--port", "0", "--json",
                             "--db", str(db), "--max-sessions-per-address", "10000"],
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


async def light_participant(ws_url: str, typing_s: float, consent_timeout: float, arrived, go) -> dict:
    """Open the link, reach consent, wait for everyone (``go``), agree, then type."""
    from calbench_devtools.page_client import PageClient

    t0 = time.perf_counter()
    c = PageClient(ws_url)
    out = {"consent": None, "echo": [], "failed": False}
    try:
        await c.connect(timeout=consent_timeout)
        if not await c.wait_for("I agree", timeout=consent_timeout):
            out["failed"] = True
            return out
        out["consent"] = time.perf_counter() - t0
        arrived(out)
        await go.wait()
        end = time.perf_counter() + typing_s
        while time.perf_counter() < end and not c.closed:  # "?" opens the help, "?" closes it: a redraw each
            await asyncio.sleep(1.0)
            await c.key("?", timed=True)
        out["echo"] = list(c.echoes)
        out["failed"] = c.closed
    except Exception:
        out["failed"] = True
    finally:
        if out["consent"] is None:
            arrived(out)
        await c.close()
    return out


async def chromium_run(links: list[str], typing_s: float, consent_timeout: float, marks: list) -> list[dict]:
    from playwright.async_api import async_playwright

    chromium = "/usr/bin/chromium"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    results: list[dict] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, headless=True, args=flags)

        async def one(link: str) -> dict:
            out = {"consent": None, "echo": [], "failed": False}
            t0 = time.perf_counter()
            seen = asyncio.Event()
            state = {"sent": None}
            page = await browser.new_page(viewport={"width": 1100, "height": 700})

            def on_ws(ws):
                def frame(payload):
                    data = payload if isinstance(payload, (bytes, bytearray)) else str(payload).encode()
                    if b"I agree" in data:
                        seen.set()
                    if state["sent"] is not None:
                        out["echo"].append(time.perf_counter() - state["sent"])
                        state["sent"] = None
                ws.on("framereceived", frame)
            page.on("websocket", on_ws)
            try:
                await page.goto(link, timeout=consent_timeout * 1000)
                await asyncio.wait_for(seen.wait(), consent_timeout)
                out["consent"] = time.perf_counter() - t0
                end = time.perf_counter() + typing_s
                while time.perf_counter() < end:
                    await asyncio.sleep(1.0)
                    state["sent"] = time.perf_counter()
                    await page.keyboard.press("?")
            except Exception:
                out["failed"] = True
            finally:
                await page.close()
            return out

        results = await asyncio.gather(*(one(link) for link in links))
        await browser.close()
    return results


async def run_one(python: str, workdir: Path, n: int, typing_s: float, consent_timeout: float,
                  chromium: bool) -> dict:
    proc, info = start_server(python, workdir, n)
    try:
        await asyncio.sleep(3.0)  # the server (and its zygote, when it has one) comes up before the links open
        before = {p: cpu_seconds(p) for p in descendants(proc.pid)}
        links = [p["link"] for p in info["participants"]]
        base = info["web"].replace("http://", "ws://").rstrip("/")
        ws_urls = [f"{base}/ws/{p['code']}" for p in info["participants"]]
        t0 = time.perf_counter()
        cpu_at_consent: dict[int, float] = {}
        done = asyncio.Event()

        async def sample():  # the app processes' CPU when everyone is at the consent screen
            while not done.is_set():
                await asyncio.sleep(0.25)
                for p in descendants(proc.pid):
                    cpu_at_consent[p] = cpu_seconds(p)

        sampler = asyncio.ensure_future(sample())
        arrivals: list[dict] = []
        go = asyncio.Event()

        def arrived(r: dict) -> None:  # everyone at consent (or failed): the CPU to the first screen
            arrivals.append(r)
            if len(arrivals) == n:
                for p in descendants(proc.pid):
                    cpu_at_consent[p] = cpu_seconds(p)
                done.set()
                go.set()

        async def light(url: str) -> dict:
            return await light_participant(url, typing_s, consent_timeout, arrived, go)

        if chromium:
            results = await chromium_run(links, typing_s, consent_timeout, [])
            done.set()
        else:
            results = await asyncio.gather(*(light(u) for u in ws_urls))
        done.set()
        sampler.cancel()
        pids = descendants(proc.pid)
        rss, pss = memory_mb([proc.pid, *pids])
        zyg = [p for p in cpu_at_consent if "calbench_tui.zygote" in cmdline(p) and parent(p) == proc.pid]
        apps = [p for p in cpu_at_consent if p not in zyg]
        app_cpu = sum(cpu_at_consent[p] - before.get(p, 0.0) for p in apps)
        echoes = sorted(e for r in results for e in r["echo"])
        reached = [r["consent"] for r in results if r["consent"] is not None]
        return {"n": n, "reached": len(reached), "all_by_s": max(reached) if len(reached) == n else None,
                "p50_consent_s": statistics.median(reached) if reached else None,
                "echo_p95_ms": 1000 * echoes[int(0.95 * (len(echoes) - 1))] if echoes else None,
                "failed": sum(1 for r in results if r["failed"]),
                "cpu_per_participant_s": app_cpu / n, "zygote_cpu_s": sum(cpu_at_consent[p] for p in zyg),
                "rss_mb": rss, "pss_mb": pss, "wall_s": time.perf_counter() - t0}
    finally:
        stop_server(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10,20,40,60,80,100", help="participant counts, comma-separated")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the server")
    ap.add_argument("--typing", type=float, default=15.0, help="seconds each participant types after consenting")
    ap.add_argument("--consent-timeout", type=float, default=300.0)
    ap.add_argument("--chromium", action="store_true", help="real pages in headless Chromium (Playwright)")
    ap.add_argument("--json", action="store_true", help="one JSON line per N instead of the table")
    args = ap.parse_args()
    loadavg = os.getloadavg()[0]
    print(f"# load average {loadavg:.1f} on {os.cpu_count()} cores; server python {args.python}", flush=True)
    if not args.json:
        print(f"{'N':>4} {'consent':>9} {'all by s':>8} {'echo p95':>9} {'failed':>6} {'cpu/part s':>10} "
              f"{'zygote s':>8} {'rss MB':>7} {'pss MB':>7}", flush=True)
    with tempfile.TemporaryDirectory(prefix="calbench-capacity-") as tmp:
        for n in [int(x) for x in args.n.split(",") if x.strip()]:
            r = asyncio.run(run_one(args.python, Path(tmp), n, args.typing, args.consent_timeout, args.chromium))
            if args.json:
                print(json.dumps(r), flush=True)
                continue

            def f(v, fmt):
                return "-" if v is None else format(v, fmt)

            print(f"{n:>4} {r['reached']:>4}/{n:<4} {f(r['all_by_s'], '8.1f')} {f(r['echo_p95_ms'], '9.0f')} "
                  f"{r['failed']:>6} {r['cpu_per_participant_s']:>10.2f} {r['zygote_cpu_s']:>8.2f} "
                  f"{r['rss_mb']:>7.0f} {f(r['pss_mb'], '7.0f')}", flush=True)


if __name__ == "__main__":
    main()
