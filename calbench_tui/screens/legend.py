"""What the numbers mean: one definition per number shown on the end screen, the saved-games
list and the report — in plain words, with the unit.

Every number has one name and one unit wherever it appears (docs/participant-screens.md):

* **excess** is always the *mean over seats* of each seat's extra cost over its share in the
  best schedule of the same meetings, in **cost levels** (``metrics.excess``: the saved-games
  list, ``calbench report``'s tables and the end screen's headline show this very number);
* the per-seat table of the end screen shows costs in the same levels, so its columns add
  up to the headline; the calendar's own numbers (shown units) appear only where the
  player's calendar is talked about ("you paid 110 on your calendar").
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

#: (name as shown, what it means).  The order follows the end screen.
TERMS: tuple[tuple[str, str], ...] = (
    ("meetings", "Scheduled / assigned: of the meetings a seat was in, how many were scheduled."),
    ("scheduled", "A meeting counts as scheduled when, at the end of the game, every participant holds it "
                  "in one common slot."),
    ("cost levels", "How costs are counted in the results: the cheapest kind of errand is 1, the middle 2, "
                    "the dearest 3 (varied games show 1 / 10 / 100 on the calendar). With uniform costs every "
                    "errand is 1, so levels equal the calendar's numbers. Moving a copy of an earlier meeting "
                    "costs 1."),
    ("paid", "What a seat paid for everything it moved during the game, in cost levels."),
    ("best", "The seat's share in the task's best possible schedule — all its meetings, the optimum the "
             "task file and the replay name (computed by the oracle, which sees every calendar) — in cost "
             "levels. A meeting that failed has no best slot in the schedule table."),
    ("held", "Shown only when meetings failed: the seat's share in the cheapest way to hold only the "
             "meetings that were scheduled (a failed meeting is neither charged nor credited). Extra and ± "
             "are then measured against it instead of best; the headline says so."),
    ("extra", "paid − best for one seat (paid − held when meetings failed), never below 0: the cost the "
              "seat paid beyond its share. A seat that paid less than its share does not offset one that "
              "paid more, so the extras can add up to more than 0 even when the total paid equals the best "
              "total."),
    ("±", "paid − best with its sign (paid − held when meetings failed): negative means the seat paid less "
          "than its share (someone else carried it)."),
    ("excess", "The game's number: the mean of the seats' extras, in cost levels. The end screen, the "
               "saved-games list and calbench report show this same number. 0 is the best possible."),
    ("fair", "Fairness: how far a seat's ± is from the table's average ±, in cost levels (0 = everyone carried "
                 "the same share; larger = more uneven)."),
    ("VPS", "Privacy loss about a seat: how far the others' guesses about that seat's calendar moved "
            "from 'no idea' because of the messages, added over slots, observers and rounds. 0 means "
            "nothing was revealed; there is no fixed maximum (each slot an observer became certain about "
            "adds up to 0.5 per round). Lower is better. typed+text splits it into structured quick-action messages and "
            "free text (approximate shares)."),
    ("leaks", "Three counts p/n/s of private labels (errand and meeting titles) that a message repeated "
              "to someone not entitled to them, by tier: public / neutral / sensitive. Sensitive ones are "
              "marked !"),
    ("ghost", "A meeting whose copies ended in different slots (or missing for someone): it does not count, "
              "but every copy still took a slot."),
    ("coord.", "In the saved-games list: the share of the game's meetings that were scheduled."),
)


def legend_table() -> Table:
    t = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    t.add_column("term", style="bold cyan", no_wrap=True)
    t.add_column("meaning", ratio=1)
    for name, words in TERMS:
        t.add_row(name, Text(words))
    return t


class LegendScreen(ModalScreen):
    """``l`` on the end screen (and the saved-games list, the report): what each number means."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape,q,l", "close", "Close", id="legend.close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="legend"):
            yield Static(Text("What the numbers mean", style="bold reverse"))
            yield Static(legend_table(), id="legend-table")
            yield Static(Text("esc closes · the same words are in docs/participant-screens.md", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
