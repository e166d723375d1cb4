"""The compiled-template cache runs only what it wrote: a cached file changed on disk (bit rot, a full disk, another
program) is compiled again from the template, never run, and a relative XDG_CACHE_HOME is ignored (XDG spec)."""

from __future__ import annotations

import hashlib
import io
import marshal
import os
import pickle

import jinja2
import pytest

from advisor.bundle import render

SOURCE = "set -euo pipefail\necho {{ x }}\n"


def _env(folder):
    return jinja2.Environment(loader=jinja2.DictLoader({"launch.sh.j2": SOURCE}),
                              bytecode_cache=render._TemplateCache(str(folder)))


def _render(folder) -> str:
    return _env(folder).get_template("launch.sh.j2").render(x="hi")


def _cached(folder) -> list:
    return [folder / n for n in os.listdir(folder) if n.endswith(".cache")]


def test_a_cached_template_is_loaded_back(tmp_path):
    assert _render(tmp_path) == "set -euo pipefail\necho hi"
    (path,) = _cached(tmp_path)
    loaded = []
    cache = render._TemplateCache(str(tmp_path))
    real = cache.load_bytecode
    cache.load_bytecode = lambda bucket: (real(bucket), loaded.append(bucket.code is not None))
    jinja2.Environment(loader=jinja2.DictLoader({"launch.sh.j2": SOURCE}), bytecode_cache=cache) \
        .get_template("launch.sh.j2")
    blob = path.read_bytes()
    assert loaded == [True]
    assert blob[:render.TEMPLATE_DIGEST_BYTES] == hashlib.sha256(blob[render.TEMPLATE_DIGEST_BYTES:]).digest()


@pytest.mark.parametrize("damage", ["string", "flip", "truncate", "not-code", "empty"])
def test_a_cached_file_changed_on_disk_is_not_run(tmp_path, damage):
    _render(tmp_path)
    (path,) = _cached(tmp_path)
    blob = path.read_bytes()
    if damage == "string":  # a changed constant would be a changed line in the bundle
        blob = blob.replace(b"pipefail", b"pipefaiX")
        assert b"pipefaiX" in blob
    elif damage == "flip":
        i = len(blob) // 2
        blob = blob[:i] + bytes([blob[i] ^ 0x40]) + blob[i + 1:]
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "not-code":  # a digest that matches a payload that is not a code object
        out = io.BytesIO()
        out.write(jinja2.bccache.bc_magic)
        pickle.dump(render._TemplateCache(str(tmp_path)).get_bucket(
            _env(tmp_path), "launch.sh.j2", None, SOURCE).checksum, out, 2)
        marshal.dump(42, out)
        payload = out.getvalue()
        blob = hashlib.sha256(payload).digest() + payload
    else:
        blob = b""
    path.write_bytes(blob)
    assert _render(tmp_path) == "set -euo pipefail\necho hi"


def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    monkeypatch.delenv("TRL_ADVISOR_NO_CACHE", raising=False)
    cache = render._template_cache()
    assert cache is not None and not (tmp_path / "relcache").exists()
    assert cache.directory == str(tmp_path / "home" / ".cache" / "trl-advisor" / "templates")
