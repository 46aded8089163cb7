"""Making LLM seats from persona specs and personas files.

Spec strings (used by ``personas.registry``)::

    llm:MODEL                      e.g. llm:gpt-4o-mini, llm:llama3.1:8b, llm:Qwen/Qwen2.5-7B-Instruct
    llm:MODEL+VARIANT              e.g. llm:gpt-4o-mini+nosy-highpressure, llm:gpt-4o-mini+redteam
    llm                            the model (and variant) come from the settings

A personas file (``--personas FILE``, TOML) gives seats their own model, endpoint and
settings.  Layers, later wins: the command line / environment → ``[defaults]`` →
``[seats.N]``::

    [defaults]
    base_url = "http://127.0.0.1:11434/v1"
    temperature = 0.2

    [seats.0]
    model = "llama3.1:8b"

    [seats.3]
    model = "gpt-4o-mini"
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    variant = "redteam"

Keys are the fields of :class:`LLMSettings`.  An ``api_key`` entry is refused: keys live
in environment variables, named by ``api_key_env``.  ``concurrency`` is a run-wide limit:
allowed in ``[defaults]``, refused in a seat table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .persona import LLMPersona
from .prompts import VARIANTS
from .settings import LLMConfigError, LLMSettings, RunPool

__all__ = ["LLMSettings", "LLMConfigError", "RunPool", "LLMPersona", "PersonasFileError", "parse_llm_spec",
           "make_llm_persona", "load_personas_file", "load_personas", "VARIANTS"]


class PersonasFileError(LLMConfigError):
    """A personas file that cannot be used; the message names the file and the key."""


def parse_llm_spec(spec: str) -> tuple[str | None, str | None]:
    """``"llm:MODEL[+VARIANT]"`` → ``(model or None, variant or None)``.

    Model names may contain ``:`` and ``/`` (``llama3.1:8b``, ``org/model``).  A ``+``
    suffix is a variant only when it names one; an unknown suffix is an error.
    """
    s = spec.strip()
    if s == "llm":
        return None, None
    if not s.startswith("llm:"):
        raise LLMConfigError(f"not an LLM persona spec: {spec!r} (expected llm:MODEL or llm:MODEL+VARIANT)")
    body = s[4:].strip()
    variant = None
    if "+" in body:
        model, _, suffix = body.rpartition("+")
        if suffix not in VARIANTS:
            raise LLMConfigError(f"unknown prompt variant {suffix!r} in {spec!r}; choose from {', '.join(VARIANTS)}")
        body, variant = model.strip(), suffix
    if not body:
        raise LLMConfigError(f"no model name in {spec!r} (expected llm:MODEL)")
    return body, variant


def make_llm_persona(spec: str, settings: LLMSettings | None = None, *, client: Any = None) -> LLMPersona:
    """An :class:`LLMPersona` for ``spec``; the spec's model/variant override the settings'.

    ``settings`` defaults to ``LLMSettings()`` (environment only).  ``client``: an
    ``AsyncOpenAI`` (or compatible) object to use instead of the run pool's (dependency
    injection for tests).
    """
    settings = settings if settings is not None else LLMSettings()
    model, variant = parse_llm_spec(spec)
    model = model or settings.model
    if not model:
        raise LLMConfigError(f"{spec!r} names no model and the settings give none (use llm:MODEL)")
    return LLMPersona(settings, model=model, variant=variant or settings.variant, client=client)


def _describe_validation(path: Path, where: str, exc: ValidationError) -> str:
    errs = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()))
        msg = e.get("msg", "invalid")
        if e.get("type") == "extra_forbidden":
            msg = "unknown setting"
        errs.append(f"{where}.{loc}: {msg}" if loc else f"{where}: {msg}")
    return f"personas file {path}: " + "; ".join(errs)


def _strict_types(path: Path, where: str, table: dict) -> None:
    """Each setting of a personas file has the type its field declares, as TOML writes it: no
    ``json_mode = "yes"`` read as true, no ``max_tokens = "512"`` (issue 35).  The settings
    model itself stays lenient for the command line and saved settings."""
    from pydantic import TypeAdapter

    for key, value in table.items():
        field = LLMSettings.model_fields.get(key)
        if field is None or key == "stop":  # unknown keys: the model says so; stop takes one string or a list
            continue
        try:
            TypeAdapter(field.annotation).validate_python(value, strict=True)
        except ValidationError:
            shown = value if isinstance(value, (bool, int, float)) else repr(value)[:40]
            raise PersonasFileError(f"personas file {path}: {where}.{key} = {shown}: write "
                                    f"{_type_words(field.annotation)}") from None


def _type_words(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    words = {"bool": "true or false", "int": "a whole number", "float": "a number", "str": "a string in quotes"}
    for k, v in words.items():
        if text in (k, f"{k} | None", f"Optional[{k}]"):
            return v
    return f"a value of type {text}"


def load_personas_file(path: str | Path, base: LLMSettings | None = None) -> dict[int, LLMSettings]:
    """Per-seat settings from a TOML personas file (see the module docstring).

    Returns ``{seat: LLMSettings}`` where each settings object has ``model`` set and
    shares ``base``'s run pool (so one concurrency limit holds for the whole run).
    Raises :class:`PersonasFileError` with one clear sentence for a bad file.  A file with
    only ``[defaults]`` gives ``{}`` here: use :func:`load_personas` for the defaults.
    """
    return load_personas(path, base)[1]


def load_personas(path: str | Path, base: LLMSettings | None = None) -> tuple[LLMSettings, dict[int, LLMSettings]]:
    """``(settings for every LLM seat: base + [defaults], {seat: its own settings})``.

    ``[defaults]`` alone is a complete file: it applies to every LLM seat (``llm:MODEL``
    seats keep their model; a bare ``llm`` seat takes ``model`` from the defaults).
    """
    from engine.inputs import loads_toml, read_text

    path = Path(path)
    base = base or LLMSettings()
    try:
        raw = loads_toml(read_text(path, "personas file", error=PersonasFileError), f"personas file {path}",
                         error=PersonasFileError)
    except FileNotFoundError:
        raise PersonasFileError(f"personas file {path} not found") from None
    except OSError as exc:
        raise PersonasFileError(f"personas file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PersonasFileError(f"personas file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PersonasFileError(f"personas file {path} is not UTF-8 text (byte {exc.start}: "
                                f"{exc.object[exc.start:exc.start + 1]!r}); save it as UTF-8") from None
    unknown = set(raw) - {"defaults", "seats", "fidelity"}  # fidelity: personas.registry.personas_file_fidelity
    if unknown:
        raise PersonasFileError(f"personas file {path}: unknown section(s) {', '.join(sorted(unknown))}; "
                                "use [defaults] and [seats.N]")
    defaults = raw.get("defaults") or {}
    seats = raw.get("seats") or {}
    if not isinstance(defaults, dict) or not isinstance(seats, dict):
        raise PersonasFileError(f"personas file {path}: [defaults] and [seats.N] must be tables")
    if not seats and not defaults:
        raise PersonasFileError(f"personas file {path} is empty; add [defaults] (settings for every LLM seat) "
                                "and/or a [seats.N] table per seat")

    def check_table(where: str, table: dict) -> None:
        if "api_key" in table:
            raise PersonasFileError(f"personas file {path}: {where}.api_key is not allowed — put the key in an "
                                    "environment variable and name it with api_key_env")
        _strict_types(path, where, table)

    check_table("defaults", defaults)
    try:
        layered = base.derive(**defaults) if defaults else base
    except ValidationError as exc:
        raise PersonasFileError(_describe_validation(path, "defaults", exc)) from None
    if "concurrency" in defaults:  # a new run-wide limit: a pool of that size, shared by every seat below
        layered._pool = RunPool(layered.concurrency)
    out: dict[int, LLMSettings] = {}
    for key, table in seats.items():
        where = f"seats.{key}"
        try:
            seat = int(key)
            if seat < 0:
                raise ValueError
        except ValueError:
            raise PersonasFileError(f"personas file {path}: [{where}] — seat must be a number 0, 1, 2, ...") from None
        if not isinstance(table, dict):
            raise PersonasFileError(f"personas file {path}: [{where}] must be a table of settings")
        check_table(where, table)
        if "concurrency" in table:
            raise PersonasFileError(f"personas file {path}: {where}.concurrency is not allowed — the limit is "
                                    "shared by the whole run; set it in [defaults] or with --llm-concurrency")
        try:
            settings = layered.derive(**table)
        except ValidationError as exc:
            raise PersonasFileError(_describe_validation(path, where, exc)) from None
        if not settings.model:
            raise PersonasFileError(f"personas file {path}: [{where}] needs model = \"...\"")
        out[seat] = settings
    return layered, dict(sorted(out.items()))
