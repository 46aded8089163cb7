"""Issue 34: the browser page is small enough for a slow link.

The page, and everything it makes a browser fetch before the first frame (textual.js,
xterm.css, the fonts its ``@font-face`` rules name, a background image a rule still asks
for), fetched from a real web front as a browser taking gzip does.
"""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from engine.game import GameConfig
from engine.taskref import hydrate_labels, resolve_tasks
from lab.server import TableServer
from lab.table import Table

#: What the page may weigh before its first frame: 2 s of a 1 Mbit/s link (125,000 B/s), so
#: that with the first screen's own output (about 14 KB), the handshakes and a slow start the
#: first frame arrives well within 10 s.
BUDGET = 2 * 125_000
FONT_BUDGET = 100_000


async def _fetched(tmp_path) -> dict[str, int]:
    """url -> bytes on the wire for the page and what it names from the host."""
    from calbench_tui.web import WebFront

    table = Table(hydrate_labels(resolve_tasks("canonical:3")[0]), ["human", "imap", "imap", "imap", "imap"],
                  GameConfig(), game_id="weight")
    front = WebFront(host="127.0.0.1", port=0, codes={c["code"] for c in table.codes()}, warm=False)
    server = TableServer([table], port=0, extra_routes=front.add_routes)
    await server.start()
    sizes: dict[str, int] = {}
    try:
        base = server.url.replace("ws://", "http://").rsplit("/table", 1)[0]
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            async def get(url: str) -> bytes:
                async with http.get(url, headers={"Accept-Encoding": "gzip, deflate"}) as r:
                    assert r.status == 200, url
                    body = await r.read()
                    sizes[url] = len(body)
                    return body
            page = (await get(f"{base}/?code={table.codes()[0]['code']}")).decode()
            assert not re.search(r'(?:src|href)="https?://(?!127\.0\.0\.1)', page)  # nothing from another site
            urls = re.findall(r'(?:src|href)="([^"]+/static/[^"]+)"', page)
            overridden = re.search(r"\.shade\s*\{\s*background-image:\s*none", page) is not None
            for url in re.findall(r'url\("([^"]+/static/[^"]+)"\)', page):
                if not (overridden and url.endswith("background.png")):  # (a browser does not fetch it)
                    urls.append(url)
            for url in dict.fromkeys(urls):
                await get(url)
    finally:
        await server.stop()
    return sizes


async def test_the_page_before_its_first_frame_fits_two_seconds_of_a_1_mbit_link(tmp_path):
    sizes = await _fetched(tmp_path)
    fonts = {u: n for u, n in sizes.items() if "/fonts/" in u}
    assert any(u.endswith("textual.js") for u in sizes) and len(fonts) >= 2, sizes
    assert sum(fonts.values()) <= FONT_BUDGET, fonts
    assert sum(sizes.values()) <= BUDGET, sizes


def test_the_reduced_fonts_draw_every_character_the_screens_use_that_roboto_mono_has():
    """Subsetting must not lose a glyph the screens draw: every non-ASCII character in the
    interface's source that the original font has is in each reduced font."""
    ttlib = pytest.importorskip("fontTools.ttLib")
    textual_serve = pytest.importorskip("textual_serve")
    import calbench_tui

    ui = Path(calbench_tui.__file__).parent
    used = {ch for f in ui.rglob("*.py") for ch in f.read_text(encoding="utf-8") if ord(ch) > 127}
    used |= {ch for f in ui.rglob("*.tcss") for ch in f.read_text(encoding="utf-8") if ord(ch) > 127}
    fonts = Path(textual_serve.__file__).parent / "static" / "fonts"
    original = ttlib.TTFont(fonts / "RobotoMono-VariableFont_wght.ttf")
    drawable = {ch for ch in used if ord(ch) in original.getBestCmap()}
    assert len(drawable) > 10  # dashes, arrows, ± × · …
    shipped = sorted((ui / "web_pages" / "static" / "fonts").glob("*.woff"))
    assert len(shipped) == 3
    for font in shipped:
        cmap = ttlib.TTFont(font).getBestCmap()
        missing = sorted(ch for ch in drawable if ord(ch) not in cmap)
        assert not missing, f"{font.name} lacks {missing}"
    licence = (ui / "web_pages" / "static" / "fonts" / "LICENSE.txt").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence
