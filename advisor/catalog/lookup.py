"""The model and GPU catalogues (advisor/catalog/data/models.toml, gpus.toml) and how `--model` / `--gpu` names resolve.

A model name may be a catalogue id, its Hugging Face repo id or an alias (all case-insensitive, no network), a size
shorthand (`7B`: the catalogue's reference model of that size), a local directory holding config.json or a path to
a config.json, or any hub id: read from the local Hugging Face cache, downloaded only when the network is allowed.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import os
import re
import socket
import sys
import urllib.parse
from collections.abc import Iterable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import TypeVar

from advisor.catalog.hf_config import spec_from_config
from advisor.core import safeio
from advisor.core.errors import AdvisorError, InputFileError, UnknownNameError
from advisor.core.request import text_problem
from advisor.core.specs import GIB, GpuSpec, ModelSpec, SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MODELS_FILE = "models.toml"
GPUS_FILE = "gpus.toml"
DATA_PACKAGE = "advisor.catalog.data"

_Row = TypeVar("_Row", ModelSpec, GpuSpec)

# `7B`, `1.5b`, `135M`: a number and a unit, nothing else.
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bBmM])\s*$")
# A Hugging Face repo id as huggingface_hub's validate_repo_id accepts it (utils/_validators.py): `org/name` of ASCII
# letters, digits, `-`, `_`, `.`, each part beginning and ending with a letter, digit or `_`, the name at most 96
# characters, no `--` or `..` (the cache folder joins parts with `--`) and no `.git` ending (_is_hub_id).
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9](?:[\w.-]{0,94}\w)?/\w(?:[\w.-]{0,94}\w)?$", re.ASCII)
# NVML names of parts whose clocks and memory differ from the desktop/server card of the same number.
_NOT_THE_SAME_PART = frozenset({"LAPTOP", "MOBILE", "MAX", "EMBEDDED"})
# A probed GPU whose memory differs more than this from a family member is not that member.
_MEMORY_TOLERANCE = 0.25
# Values of HF_HUB_OFFLINE that huggingface_hub treats as true.
_TRUE = frozenset({"1", "true", "yes", "on"})
# What refs/main of a hub cache repo may hold: the name of one snapshot folder (huggingface_hub writes the 40-hex
# commit); one path component, so that a ref cannot point outside snapshots/.
_REVISION_RE = re.compile(r"^(?!\.{1,2}$)[\w.-]{1,128}$")
_MODEL_PATH_HINT = "pass a directory written by save_pretrained, a config.json file, or a catalogue id"


class CatalogError(AdvisorError):
    """A packaged catalogue file is malformed: a damaged install or a bad edit, not the user's input."""


_REINSTALL = "the catalogue shipped with trl-advisor is damaged; reinstall it, or undo the edit to advisor/catalog/data"


# ------------------------------------------------------------------------------------------------ loading


def _read_data_file(filename: str) -> str:
    return files(DATA_PACKAGE).joinpath(filename).read_text(encoding="utf-8")


def parse_rows(text: str, filename: str, row_type: type[_Row]) -> list[_Row]:
    """Validate every table of a catalogue TOML text into `row_type`; the table name is the row's id."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{filename}: not valid TOML ({exc})", hint=_REINSTALL) from None
    rows: list[_Row] = []
    for key, row in data.items():
        if not isinstance(row, dict):
            raise CatalogError(f"{filename}: '{key}' is not a table", hint=_REINSTALL)
        if "id" in row:
            raise CatalogError(f"{filename}: row [{key}] sets 'id'; the table name is the id", hint=_REINSTALL)
        unknown = sorted(set(row) - set(row_type.field_names()))
        if unknown:
            raise CatalogError(f"{filename}: row [{key}], field {unknown[0]}: not a field of a catalogue row",
                               hint=_REINSTALL)
        try:
            rows.append(row_type(id=key, **row))
        except TypeError as exc:  # a required field is missing
            missing = re.findall(r"'(\w+)'", str(exc))
            field = missing[0] if missing else "(row)"
            raise CatalogError(f"{filename}: row [{key}], field {field}: missing", hint=_REINSTALL) from None
        except SpecError as exc:
            raise CatalogError(f"{filename}: row [{key}], field {exc.field}: {exc.message}", hint=_REINSTALL) from None
    return rows


def size_key(text: str) -> str | None:
    """Canonical form of a size shorthand (`7b` -> `7B`, `1.50B` -> `1.5B`, `135m` -> `135M`); None if not one."""
    match = _SIZE_RE.match(text)
    if not match:
        return None
    number, unit = match.groups()
    whole, _, frac = number.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return f"{whole}.{frac}{unit.upper()}" if frac else f"{whole}{unit.upper()}"


def _check_unique(filename: str, rows: Iterable[tuple[str, Iterable[str]]]) -> dict[str, str]:
    """Map every lookup key to its row id; two rows claiming one key is a catalogue error."""
    owner: dict[str, str] = {}
    for row_id, keys in rows:
        for key in keys:
            other = owner.get(key)
            if other is not None and other != row_id:
                raise CatalogError(f"{filename}: rows [{other}] and [{row_id}] both answer to '{key}'", hint=_REINSTALL)
            owner[key] = row_id
    return owner


def _model_keys(spec: ModelSpec) -> list[str]:
    return [spec.id, spec.hf_id.casefold(), *(alias.casefold() for alias in spec.aliases)]


def validate_models(models: list[ModelSpec], filename: str = MODELS_FILE) -> None:
    """Catalogue rules ModelSpec cannot check row by row: lower-case ids, unique names and sizes."""
    for spec in models:
        if spec.id != spec.id.lower() or not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", spec.id):
            raise CatalogError(f"{filename}: row [{spec.id}]: ids are lower case letters, digits, '.' and '-'")
        if spec.size is not None and size_key(spec.size) != spec.size:
            raise CatalogError(f"{filename}: row [{spec.id}], field size: '{spec.size}' is not a size like 7B or 135M")
    _check_unique(filename, ((spec.id, _model_keys(spec)) for spec in models))
    _check_unique(filename, ((spec.id, [f"size {spec.size}"]) for spec in models if spec.size))


def _gpu_key(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().casefold())


def _gpu_keys(spec: GpuSpec) -> list[str]:
    return [_gpu_key(name) for name in (spec.id, *spec.aliases, *spec.nvml_names)]


def validate_gpus(gpus: list[GpuSpec], filename: str = GPUS_FILE) -> None:
    """Unique ids, aliases and NVML names across rows."""
    _check_unique(filename, ((spec.id, _gpu_keys(spec)) for spec in gpus))


@functools.lru_cache(maxsize=1)
def _models() -> tuple[ModelSpec, ...]:
    models = parse_rows(_read_data_file(MODELS_FILE), MODELS_FILE, ModelSpec)
    validate_models(models)
    return tuple(models)


@functools.lru_cache(maxsize=1)
def _gpus() -> tuple[GpuSpec, ...]:
    gpus = parse_rows(_read_data_file(GPUS_FILE), GPUS_FILE, GpuSpec)
    validate_gpus(gpus)
    return tuple(gpus)


def all_models() -> list[ModelSpec]:
    """Every catalogue model, in file order."""
    return list(_models())


def all_gpus() -> list[GpuSpec]:
    """Every catalogue GPU, in file order."""
    return list(_gpus())


@functools.lru_cache(maxsize=1)
def _model_index() -> dict[str, ModelSpec]:
    return {key: spec for spec in _models() for key in _model_keys(spec)}


@functools.lru_cache(maxsize=1)
def _size_index() -> dict[str, ModelSpec]:
    return {spec.size: spec for spec in _models() if spec.size}


@functools.lru_cache(maxsize=1)
def _gpu_index() -> dict[str, GpuSpec]:
    return {key: spec for spec in _gpus() for key in _gpu_keys(spec)}


def catalogue_model(name: str) -> ModelSpec | None:
    """The catalogue row `name` is the id, hub id or alias of; None for anything else. Reads no file and no network
    (the estimate asks it inside the planner's search)."""
    return _model_index().get(name.strip().casefold())


def model_sizes() -> dict[str, ModelSpec]:
    """Size shorthand -> its reference model."""
    return dict(_size_index())


# ------------------------------------------------------------------------------------------------ suggestions


def _did_you_mean(name: str, choices: Mapping[str, str]) -> str | None:
    """`did you mean X or Y?` over the lookup keys (`choices` maps key -> how to print it)."""
    found = difflib.get_close_matches(name.strip().casefold(), list(choices), n=3, cutoff=0.6)
    shown = list(dict.fromkeys(choices[key] for key in found))
    return f"did you mean {' or '.join(shown)}?" if shown else None


def _model_choices(name: str) -> dict[str, str]:
    """Lookup key -> how to suggest its row: the repo id when `name` looks like one, else the catalogue id."""
    as_hub = "/" in name
    choices: dict[str, str] = {}
    for spec in _models():
        shown = spec.hf_id if as_hub else spec.id
        for key in _model_keys(spec):
            choices[key] = shown
    return choices


# ------------------------------------------------------------------------------------------------ models


def expand_user(text: str) -> Path:
    """`~` and `~user` expanded as a shell does, and as huggingface_hub expands HF_HOME (constants.py:
    os.path.expanduser): a `~nobody` with no such user, or `~` with neither HOME nor a passwd entry, stays as typed.
    pathlib's Path.expanduser and Path.home raise RuntimeError there instead ("Could not determine home
    directory"), which reached the user as an internal error."""
    return Path(os.path.expanduser(text))


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, found the way huggingface_hub finds it."""
    env = os.environ
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return expand_user(env[var])
    if env.get("HF_HOME"):
        return expand_user(env["HF_HOME"]) / "hub"
    base = expand_user(env["XDG_CACHE_HOME"] if env.get("XDG_CACHE_HOME") else "~/.cache")
    return base / "huggingface" / "hub"


def _cached_config(repo_id: str) -> tuple[Path, str] | None:
    """(config.json path, revision) of `repo_id` in the hub cache; the `main` ref's snapshot first."""
    cache = hf_cache_dir()
    folder = "models--" + repo_id.replace("/", "--")
    repo_dir = cache / folder
    if not repo_dir.is_dir():
        try:  # the cache folder keeps the case the repo was downloaded with
            repo_dir = next(p for p in cache.iterdir() if p.name.casefold() == folder.casefold() and p.is_dir())
        except (OSError, StopIteration):
            return None
    snapshots = repo_dir / "snapshots"
    order: list[Path] = []
    ref = repo_dir / "refs" / "main"
    try:
        revision = safeio.read_text(ref, max_bytes=safeio.MAX_REF_BYTES, what="cache ref").strip()
    except safeio.UnsafeInputError:  # no ref, or not a small text file: fall back to the newest snapshot
        revision = ""
    if _REVISION_RE.match(revision):  # anything else (`../..`) must not become a path
        order.append(snapshots / revision)
    try:
        if snapshots.is_dir():
            order += sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    for snapshot in order:
        config = snapshot / "config.json"
        if config.is_file():
            return config, snapshot.name
    return None


def _network_allowed(allow_network: bool | None) -> bool:
    if allow_network is not None:
        return allow_network
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in _TRUE


HUB_CONNECT_SECONDS = 3.0
"""How long `generate` waits to reach the hub before calling the machine offline. huggingface_hub itself retries a
failed request five times with back-off (about 20 s, a retry line on stderr each), which is a hang to a user."""
HUB_ETAG_SECONDS = 5.0
"""hf_hub_download's metadata request timeout once the hub answered (its default is 10 s)."""
REASON_CHARS = 160


def _is_hub_id(text: str) -> bool:
    """`org/name` as the hub accepts it (_HUB_ID_RE): an id it would refuse is never looked up or written."""
    return bool(_HUB_ID_RE.match(text)) and "--" not in text and ".." not in text and not text.endswith(".git")


def _hub_unreachable() -> str | None:
    """Why the hub's host cannot be reached (None when it can, or when a proxy decides: a direct connection proves
    nothing then). One TCP connection, HUB_CONNECT_SECONDS at most."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)  # hub_endpoint_problem() vetted HF_ENDPOINT
    try:
        socket.create_connection((host, port), timeout=HUB_CONNECT_SECONDS).close()
    except OSError as exc:
        return f"{host} cannot be reached ({exc.strerror or type(exc).__name__}): offline?"
    return None


def _short_reason(exc: BaseException) -> str:
    """The first line of an error, cut at a word boundary (never mid-word) to REASON_CHARS."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(line) <= REASON_CHARS:
        return line
    return line[:REASON_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


@contextlib.contextmanager
def _quiet_hub():
    """huggingface_hub logs each retry as a warning; the user gets one error line from us instead."""
    log = logging.getLogger("huggingface_hub")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def hub_endpoint_problem() -> str | None:
    """What is wrong with HF_ENDPOINT (None when unset or a usable http(s) URL). huggingface_hub parses it when it is
    imported and raises ValueError on a bad host or port, so it is checked before that import."""
    raw = os.environ.get("HF_ENDPOINT")
    if not raw:
        return None
    try:
        url = urllib.parse.urlsplit(raw)
        url.port  # noqa: B018 - parsing the port is the check: "http://h:99999" and "http://h:abc" raise here
    except ValueError as exc:
        return f"HF_ENDPOINT is not a URL ({exc})"
    if url.scheme not in ("http", "https") or not url.hostname:
        return "HF_ENDPOINT is not an http(s) URL with a host"
    return None


def _download_config(repo_id: str) -> Path:
    bad = hub_endpoint_problem()
    if bad:
        raise UnknownNameError(f"model '{repo_id}' is not in the catalogue or the local Hugging Face cache, and {bad}",
                               hint="unset HF_ENDPOINT or set it to the hub's URL (https://huggingface.co), or pass "
                                    "a local directory with config.json")
    try:
        from huggingface_hub import hf_hub_download  # lazy: only this path needs it
    except ImportError:
        raise UnknownNameError(
            f"model '{repo_id}' is not in the catalogue or the local Hugging Face cache",
            hint="install huggingface_hub to download its config.json, or pass a local directory with config.json",
        ) from None
    near = _did_you_mean(repo_id, _model_choices(repo_id))
    offline = _hub_unreachable()
    if offline:
        raise UnknownNameError(
            f"model '{repo_id}' is not in the catalogue or the local Hugging Face cache, and {offline}",
            hint=near or "pass a local directory with config.json (or download it once online: the cache is read "
                         "offline)")
    hint = near or "check the repo id; for a gated repo log in first (`hf auth login`), or pass a local config.json"
    try:
        with _quiet_hub():
            return Path(hf_hub_download(repo_id, "config.json", etag_timeout=HUB_ETAG_SECONDS))
    except Exception as exc:  # offline, 404, gated repo...: each means "no config.json for this name"
        raise UnknownNameError(
            f"model '{repo_id}' is not in the catalogue and its config.json could not be downloaded: "
            f"{_short_reason(exc)}", hint=hint) from None


_CONFIG_HINT = "config.json must be the JSON file transformers writes next to the weights"


def read_config_file(path: Path) -> dict:
    """A config.json as a dict; InputFileError if it is not a regular file of at most safeio.MAX_CONFIG_BYTES, not
    UTF-8 JSON (NaN, Infinity and deep nesting refused), or not a JSON object. A named pipe or a device given as
    the model path is refused at once, without blocking on it or reading it."""
    try:
        text = safeio.read_text(path, max_bytes=safeio.MAX_CONFIG_BYTES, what="config.json")
        cfg = safeio.load_json(text, where=str(path))
    except safeio.UnsafeInputError as exc:
        hint = (_MODEL_PATH_HINT if exc.reason in ("missing", "not-regular", "too-large", "unreadable")
                else _CONFIG_HINT)
        raise InputFileError(exc.message, hint=hint) from None
    if not isinstance(cfg, dict):
        raise InputFileError(f"{path}: config.json is not a JSON object", hint=_CONFIG_HINT)
    return cfg


def _local_spec(path: Path) -> ModelSpec:
    if path.is_dir():
        config = path / "config.json"
        if not os.path.lexists(config):  # one that exists but is not a regular file is refused by the reader
            raise InputFileError(f"{path}: no config.json in this directory", hint=_MODEL_PATH_HINT)
        model_dir = path
    else:
        config, model_dir = path, path.parent
    cfg = read_config_file(config)
    model_dir = model_dir.resolve()
    # The resolved path becomes the bundle's MODEL_ID and the served model: it must be one printable line, also
    # when it was reached as `--model .` from a folder whose name was never on the command line.
    problem = text_problem(str(config.resolve()))
    if problem:
        raise InputFileError(f"the model folder's path {problem}", hint="rename the folder (printable characters "
                             "only), or copy the model to a folder whose path is plain text")
    return spec_from_config(
        cfg, source=config.resolve().as_uri(), id=model_dir.name.lower() or "local", hf_id=str(model_dir)
    )


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~", "\\")) or name.endswith(".json") or "\\" in name or name.count("/") > 1


def resolve_model(name: str, *, allow_network: bool | None = None) -> ModelSpec:
    """The ModelSpec `--model NAME` means; see the module docstring for the accepted forms.

    `allow_network` (default: True unless HF_HUB_OFFLINE is set) lets an uncached hub id be fetched with
    huggingface_hub. Raises UnknownNameError for a name that resolves to nothing and InputFileError for an
    unreadable or malformed config.json or a directory without one.
    """
    text = name.strip()
    if not text:
        raise UnknownNameError("no model given", hint="pass a catalogue id such as qwen2.5-7b, a size such as 7B, "
                               "a Hugging Face repo id or a local directory")
    spec = _model_index().get(text.casefold())
    if spec is not None:
        return spec

    size = size_key(text)
    if size is not None:
        spec = _size_index().get(size)
        if spec is None:
            sizes = ", ".join(sorted(_size_index(), key=lambda s: float(s[:-1]) * (1e-3 if s[-1] == "M" else 1)))
            raise UnknownNameError(f"no catalogue model is the reference for size {size}", hint=f"sizes: {sizes}")
        return spec

    path = expand_user(text)
    if path.exists():
        return _local_spec(path)
    if _looks_like_path(text):
        raise InputFileError(f"{text}: no such file or directory",
                             hint="pass a model directory containing config.json, or a path to a config.json")

    if _is_hub_id(text):
        cached = _cached_config(text)
        if cached is not None:
            config, revision = cached
            cfg = read_config_file(config)
            return spec_from_config(
                cfg, source=f"https://huggingface.co/{text}/blob/{revision}/config.json", id=text.lower(), hf_id=text
            )
        if _network_allowed(allow_network):
            cfg = read_config_file(_download_config(text))
            return spec_from_config(
                cfg, source=f"https://huggingface.co/{text}/blob/main/config.json", id=text.lower(), hf_id=text
            )
        raise UnknownNameError(
            f"model '{text}' is not in the catalogue or the local Hugging Face cache ({hf_cache_dir()}), "
            "and downloads are off",
            hint=_did_you_mean(text, _model_choices(text))
            or "run once with network access (unset HF_HUB_OFFLINE), or pass a local directory with config.json",
        )

    raise UnknownNameError(
        f"unknown model '{text}'",
        hint=_did_you_mean(text, _model_choices(text))
        or "run `trl-advisor models` for the catalogue; a hub id (org/name) or a local directory also works",
    )


# ------------------------------------------------------------------------------------------------ GPUs


def resolve_gpu(name: str) -> GpuSpec:
    """The GpuSpec `--gpu NAME` means: a catalogue id, alias or NVML name, case-insensitive."""
    spec = _gpu_index().get(_gpu_key(name))
    if spec is not None:
        return spec
    # A family name without its memory size (`V100`) matches several rows: naming one of them would plan for a
    # memory size the user never chose, so every match is listed instead.
    tokens = _tokens(name)
    same_family = sorted((gpu for gpu in _gpus() if _family(gpu) and _family(gpu) == tokens),
                         key=lambda gpu: gpu.memory_bytes)
    if len(same_family) > 1:
        shown = ", ".join(f"{gpu.id} ({gpu.memory_gib:.0f} GiB)" for gpu in same_family)
        raise UnknownNameError(f"GPU '{name.strip()}' is ambiguous: {shown}",
                               hint="pass one of them: " + " or ".join(f"--gpu {gpu.id}" for gpu in same_family))
    choices = {}
    for gpu in _gpus():
        for shown in (gpu.id, *gpu.aliases):
            choices[_gpu_key(shown)] = gpu.id if shown == gpu.id else shown
    if name.strip().isdigit():  # `--gpu 8` for `--gpus 8`: a count where the GPU's kind belongs
        raise UnknownNameError(f"unknown GPU '{name.strip()}': --gpu names the kind of GPU",
                               hint=f"for {name.strip()} GPUs pass --gpus {name.strip()}; `trl-advisor gpus` lists "
                                    "the kinds")
    raise UnknownNameError(
        f"unknown GPU '{name.strip()}'",
        hint=_did_you_mean(_gpu_key(name), choices) or "run `trl-advisor gpus` for the catalogue",
    )


def _tokens(text: str) -> set[str]:
    return {token for token in re.split(r"[^A-Za-z0-9]+", text.upper()) if token}


def _family(spec: GpuSpec) -> frozenset[str]:
    """Tokens a probed name must contain to be this part: the id's tokens less memory sizes and 'RTX'."""
    return frozenset(t for t in _tokens(spec.id) if t != "RTX" and not re.fullmatch(r"\d+GB", t))


def match_nvml_name(nvml_name: str, memory_total_bytes: int | None = None) -> GpuSpec | None:
    """The catalogue row of a probed GPU, or None when no row is plausibly the same part.

    Known NVML names match exactly. Otherwise the rows whose family tokens (`A100`, `H100` + `PCIE`, `4090`...) all
    appear in the name are candidates, the most specific family wins, and among those the one with the closest
    memory (from `memory_total_bytes`, else an `80GB`-style token in the name); a memory more than 25 % away from
    every candidate, or a laptop / embedded part, gives None.
    """
    exact = _gpu_index().get(_gpu_key(nvml_name))
    if exact is not None:
        return exact
    tokens = _tokens(nvml_name)
    if not tokens or tokens & _NOT_THE_SAME_PART:
        return None
    candidates = [spec for spec in _gpus() if _family(spec) and _family(spec) <= tokens]
    if not candidates:
        return None
    most_specific = max(len(_family(spec)) for spec in candidates)
    candidates = [spec for spec in candidates if len(_family(spec)) == most_specific]

    memory = memory_total_bytes
    if memory is None:
        sizes = [int(t[:-2]) for t in tokens if re.fullmatch(r"\d+GB", t)]
        memory = sizes[0] * GIB if sizes else None
    if memory is None:
        return candidates[0]
    best = min(candidates, key=lambda spec: abs(spec.memory_bytes - memory))
    if abs(best.memory_bytes - memory) > _MEMORY_TOLERANCE * best.memory_bytes:
        return None
    return best
