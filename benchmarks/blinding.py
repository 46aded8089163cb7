"""Benchmark: can a reader tell an LLM partner from a scripted one by the words alone?

Run:  .venv/bin/python benchmarks/blinding.py [--cycles 1] [--folds 5] [--repeats 5] [--json]

A simulated blinded study (the example study of ``calbench study init``, its conditions
replaced by four: IMAP, SD-MAP, DSM-Welfare partners, and every partner an LLM on the
project's loopback mock endpoint, ``calbench_devtools.mock_endpoint``) is played by
simulated participants twice into fresh databases: with ``phrasebook = "off"`` (the
partners' own words) and with ``phrasebook = "all"`` (every partner through
``engine/phrasebook.py``; the LLM partners typed only).  The messages the participants
*received* (sender not the participant, the participant among the recipients, as
``study export`` writes them in ``messages.csv``) are labelled by the sender's kind
(``llm`` or ``protocol``) and classified by a bag-of-words multinomial naive Bayes (Laplace
smoothing, lower-cased words plus one token for any number; written here in plain Python),
with the classes balanced by sampling the larger one down and ``--folds``-fold stratified
cross-validation, repeated ``--repeats`` times with different seeds.  Printed: messages
per class, accuracy before (off) and after (all), mean and spread over repeats, the chance
level (50 %), the words that most give a sender away, and the accuracy on the messages whose
*act* (what they say: slots that work, costs, a proposal …, read by
``engine.phrasebook.act_of_text``) occurs for both kinds, equally many of each — the
wording alone.

50 % is the goal after: the words then say nothing about who wrote them.  What remains is
*what* partners say (an IMAP partner asks everyone's costs, a DSM partner asks about a few
slots, the mock LLM offers slot lists), which the phrasebook does not change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.study.check import dry_run  # noqa: E402
from lab.study.example import EXAMPLE  # noqa: E402
from lab.study.export import study_rows  # noqa: E402
from lab.study.model import parse_study  # noqa: E402
from saves.store import Store  # noqa: E402

CONDITIONS = """
[[conditions]]
name = "imap"
partners = "imap"
max_turns = 6
phrasebook = "{mode}"

[[conditions]]
name = "sdmap"
partners = "sdmap"
max_turns = 6
phrasebook = "{mode}"

[[conditions]]
name = "dsm"
partners = "dsm-welfare"
max_turns = 6
phrasebook = "{mode}"

[[conditions]]
name = "llm"
partners = "llm:mock-model"
max_turns = 6
phrasebook = "{mode}"
[conditions.llm]
base_url = "http://127.0.0.1:8765/v1"
"""


def study_text(mode: str) -> str:
    """The example study with the four conditions above and eight tasks (two per condition)."""
    start = EXAMPLE.index("[[conditions]]")
    end = EXAMPLE.index("# -- tasks")
    text = EXAMPLE[:start] + CONDITIONS.format(mode=mode) + "\n" + EXAMPLE[end:]
    return (text.replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]',
                         'pool = ["seed:100", "seed:101", "seed:102", "seed:103", "seed:104", "seed:105", '
                         '"seed:106", "seed:107"]')
            .replace("games_per_condition = 1", "games_per_condition = 2"))


async def received(mode: str, cycles: int) -> list[tuple[str, str]]:
    """``(text, "llm" | "protocol")`` of every message a simulated participant received."""
    study = parse_study(study_text(mode))
    out: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(Path(tmp) / "blinding.db") as store:
            for _ in range(cycles):
                r = await dry_run(study, store, mock=True)
                assert r["ok"], r["failures"]
                rows = await study_rows(study, store)
                me = {g["game_id"]: int(g["seat"]) for g in rows["games.csv"] if g["is_participant_seat"] == 1}
                for m in rows["messages.csv"]:
                    seat = me.get(m["game_id"])
                    if seat is None or m["sender"] == seat or str(seat) not in str(m["recipients"]).split("|"):
                        continue
                    if m["sender_kind"] in ("llm", "protocol") and m["text"]:
                        out.append((m["text"], m["sender_kind"]))
    return out


_TOKEN = re.compile(r"[a-z']+|\d+")


def tokens(text: str) -> list[str]:
    return ["<num>" if t.isdigit() else t for t in _TOKEN.findall(text.lower())]


class NaiveBayes:
    """Multinomial naive Bayes over word counts, Laplace smoothing (alpha = 1)."""

    def fit(self, docs: list[list[str]], labels: list[str]) -> "NaiveBayes":
        self.classes = sorted(set(labels))
        self.prior = {c: math.log(labels.count(c) / len(labels)) for c in self.classes}
        self.counts = {c: Counter() for c in self.classes}
        for d, y in zip(docs, labels):
            self.counts[y].update(d)
        self.vocab = set().union(*self.counts.values())
        self.total = {c: sum(self.counts[c].values()) for c in self.classes}
        return self

    def logp(self, word: str, c: str) -> float:
        return math.log((self.counts[c][word] + 1) / (self.total[c] + len(self.vocab)))

    def predict(self, doc: list[str]) -> str:
        words = [w for w in doc if w in self.vocab]
        return max(self.classes, key=lambda c: (self.prior[c] + sum(self.logp(w, c) for w in words), c))

    def telling(self, n: int = 8) -> list[tuple[str, str, float]]:
        """The words whose log-likelihood ratio between the classes is largest."""
        a, b = self.classes
        ratio = [(w, self.logp(w, a) - self.logp(w, b)) for w in self.vocab]
        ratio.sort(key=lambda t: -abs(t[1]))
        return [(w, a if r > 0 else b, abs(r)) for w, r in ratio[:n]]


def cross_validated(data: list[tuple[str, str]], folds: int, seed: int) -> tuple[float, NaiveBayes]:
    """Accuracy of naive Bayes under stratified k-fold CV, classes balanced by sampling down."""
    rng = random.Random(seed)
    by: dict[str, list[list[str]]] = {}
    for text, y in data:
        by.setdefault(y, []).append(tokens(text))
    n = min(len(v) for v in by.values())
    folds_of: list[list[tuple[list[str], str]]] = [[] for _ in range(folds)]
    for y, docs in sorted(by.items()):
        picked = rng.sample(docs, n)
        for i, d in enumerate(picked):
            folds_of[i % folds].append((d, y))
    right = total = 0
    for k in range(folds):
        train = [x for j in range(folds) if j != k for x in folds_of[j]]
        nb = NaiveBayes().fit([d for d, _ in train], [y for _, y in train])
        for d, y in folds_of[k]:
            right += nb.predict(d) == y
            total += 1
    full = NaiveBayes().fit([d for f in folds_of for d, _ in f], [y for f in folds_of for _, y in f])
    return right / total, full


def same_acts(data: list[tuple[str, str]], seed: int = 0) -> list[tuple[str, str]]:
    """The messages whose act (the verbs ``engine.phrasebook.act_of_text`` reads: works,
    fails, costs, propose, ask …) occurs in both classes, as many of each class per act: what
    is left to tell them apart is the wording, not what they say."""
    from engine.phrasebook import act_of_text

    by: dict[tuple, dict[str, list[tuple[str, str]]]] = {}
    for text, y in data:
        by.setdefault(act_of_text(text, 1000).verbs, {}).setdefault(y, []).append((text, y))
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for verbs in sorted(by):
        groups = by[verbs]
        if len(groups) == 2:
            n = min(len(g) for g in groups.values())
            for y in sorted(groups):
                out.extend(rng.sample(groups[y], n))
    return out


def evaluate(data: list[tuple[str, str]], folds: int, repeats: int) -> dict:
    accs = []
    model = None
    for r in range(repeats):
        acc, model = cross_validated(data, folds, seed=r)
        accs.append(acc)
    per = Counter(y for _, y in data)
    mean = sum(accs) / len(accs)
    return {"messages": dict(per), "balanced_per_class": min(per.values()), "accuracy": round(mean, 4),
            "min": round(min(accs), 4), "max": round(max(accs), 4),
            "telling_words": [(w, c, round(r, 2)) for w, c, r in (model.telling() if model else [])]}


async def main(args) -> None:
    results = {}
    for mode in ("off", "all"):
        data = await received(mode, args.cycles)
        results[mode] = evaluate(data, args.folds, args.repeats)
        results[mode]["examples"] = {k: [t for t, y in data if y == k][:3] for k in ("protocol", "llm")}
        same = same_acts(data)
        if len({y for _, y in same}) == 2 and len(same) >= 2 * args.folds:
            results[mode]["same_acts"] = evaluate(same, args.folds, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for mode, label in (("off", "before (phrasebook off)"), ("all", "after (phrasebook all)")):
        r = results[mode]
        print(f"{label}: accuracy {r['accuracy']:.1%} (repeats {r['min']:.1%}-{r['max']:.1%}); "
              f"messages {r['messages']}, {r['balanced_per_class']} per class after balancing; chance 50.0%")
        print("  most telling words: " + ", ".join(f"{w} ({c})" for w, c, _ in r["telling_words"]))
        if r.get("same_acts"):
            s = r["same_acts"]
            print(f"  the same acts only (what they say held equal): accuracy {s['accuracy']:.1%} "
                  f"(repeats {s['min']:.1%}-{s['max']:.1%}), {s['balanced_per_class']} per class")
        for k, texts in r["examples"].items():
            for t in texts[:2]:
                print(f"  {k:>8}: {t}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=1, help="counterbalancing cycles of simulated participants")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5, help="cross-validations with different seeds")
    ap.add_argument("--json", action="store_true")
    asyncio.run(main(ap.parse_args()))
