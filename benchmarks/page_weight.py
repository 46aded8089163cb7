"""The browser page's weight before its first frame, and the font subsets that keep it small.

``python benchmarks/page_weight.py subset`` makes ``calbench_tui/web_pages/static/fonts/*.woff``
from textual-serve's Roboto Mono (Apache-2.0; the licence ships beside them): static regular,
bold and italic instances of its variable fonts, with only the characters the game's screens
use (Latin, punctuation, arrows, box drawing, blocks, shapes) and no hinting.  Run it once when textual-serve's font
changes; fontTools is needed here only, never at run time.

``python benchmarks/page_weight.py measure`` serves a table's page on the loopback, fetches
what the page requests before its first frame (the page, textual.js, xterm.css, the fonts its
``@font-face`` rules name) as a browser asking for gzip would, and prints the bytes and the
time they take over a 1 Mbit/s link (bytes / 125,000 per second, no latency); then opens the
page's websocket (``calbench_devtools.page_client``) and adds the bytes of the app's output up
to its first screen.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FONTS = ROOT / "calbench_tui" / "web_pages" / "static" / "fonts"
#: What the screens draw: ASCII and Latin-1, Latin Extended-A, Greek (Δ σ), general punctuation
#: (– — …), currency, arrows (← →), math operators (≤ ≥), box drawing and blocks, geometric shapes,
#: ★ ✓ ✗ (tests/cli/test_page_weight.py checks every character of the interface's source).
UNICODES = ("U+0020-007E,U+00A0-017F,U+02C6-02DD,U+0370-03FF,U+2000-206F,U+20A0-20BF,U+2100-214F,"
            "U+2190-21FF,U+2200-22FF,U+2300-23FF,U+2500-25FF,U+2600-26FF,U+2700-27BF")
#: (textual-serve's variable font, weight of the static instance, our file)
MADE = [("RobotoMono-VariableFont_wght.ttf", 400, "calbench-mono-400.woff"),
        ("RobotoMono-VariableFont_wght.ttf", 700, "calbench-mono-700.woff"),
        ("RobotoMono-Italic-VariableFont_wght.ttf", 400, "calbench-mono-italic-400.woff")]
LINK_BPS = 1_000_000 / 8  # 1 Mbit/s in bytes per second


def subset() -> None:
    """The static instances the page needs (a terminal draws two weights; bold italic is the
    italic made bold by the browser), cut to :data:`UNICODES`, without hinting, as WOFF."""
    from fontTools import subset as ft
    from fontTools.ttLib import TTFont
    from fontTools.varLib import instancer
    import textual_serve

    src = Path(textual_serve.__file__).parent / "static" / "fonts"
    for name, weight, out in MADE:
        font = instancer.instantiateVariableFont(TTFont(src / name), {"wght": weight})
        opts = ft.Options()
        opts.hinting, opts.flavor, opts.layout_features = False, "woff", ["*"]
        cut = ft.Subsetter(opts)
        cut.populate(unicodes=ft.parse_unicodes(UNICODES))
        cut.subset(font)
        font.flavor = "woff"
        font.save(FONTS / out)
        print(f"{name} ({(src / name).stat().st_size} B) at weight {weight} -> {out}: {(FONTS / out).stat().st_size} B")


async def measure() -> int:
    import aiohttp

    from engine.game import GameConfig
    from engine.taskref import hydrate_labels, resolve_tasks
    from lab.server import TableServer
    from lab.table import Table
    from calbench_devtools.page_client import PageClient
    from calbench_tui.web import WebFront

    table = Table(hydrate_labels(resolve_tasks("canonical:3")[0]), ["human", "imap", "imap", "imap", "imap"],
                  GameConfig(), game_id="weight")
    front = WebFront(host="127.0.0.1", port=0, codes={c["code"] for c in table.codes()}, warm=False)
    server = TableServer([table], port=0, extra_routes=front.add_routes)
    await server.start()
    front.table_url = server.url
    total = statics = 0
    try:
        base = server.url.replace("ws://", "http://").rsplit("/table", 1)[0]
        code = table.codes()[0]["code"]
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            async def get(url: str) -> bytes:
                async with http.get(url, headers={"Accept-Encoding": "gzip"}) as r:
                    body = await r.read()
                    print(f"{len(body):>8} B  {r.headers.get('Content-Encoding', '-'):<5} {url.split('/', 3)[-1][:70]}")
                    return body
            page = (await get(f"{base}/?code={code}")).decode()
            total += len(page.encode())
            urls = re.findall(r'(?:src|href)="([^"]+/static/[^"]+)"', page)
            urls += re.findall(r'url\("([^"]+/static/[^"]+)"\)', page)
            for url in dict.fromkeys(urls):
                if "background.png" in url and "background-image: none" in page:
                    continue  # the rule that named it is overridden: a browser does not fetch it
                total += len(await get(url))
            statics = total
            # the first frame itself: the app's output until its first screen shows (uncompressed;
            # a browser's websocket is usually deflated, so this is an upper bound)
            client = await PageClient(re.search(r'data-session-websocket-url="([^"]+)"', page).group(1)).connect()
            try:
                # the instructions over the game (a table's first screen) or the lobby
                shown = await client.wait_for("esc starts the game", "You are Agent", timeout=120)
                first = client.received
            finally:
                await client.close()
            print(f"{first:>8} B  ws    the first screen ({'shown' if shown else 'NOT shown in 120 s'})")
            total += first
    finally:
        await server.stop()
    print(f"statics {statics} B: {statics / LINK_BPS:.1f} s at 1 Mbit/s; with the first screen {total} B: "
          f"{total / LINK_BPS:.1f} s")
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["subset", "measure"])
    a = p.parse_args(argv)
    if a.what == "subset":
        subset()
    else:
        asyncio.run(measure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
