"""The cache directory is not trusted: generated modules are checked against their source, JSON
entries against the digest sealed into them, and only regular files of bounded size are read
(a FIFO would block forever). An entry that fails is a miss, with one TileDSLWarning saying why.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

import tiledsl as td
from autotune import cache
from autotune.tuner import default_storage
from tiledsl.runtime import cache_files

pytest.importorskip("triton")
from lowering.backends.triton import loader  # noqa: E402

SOURCE = '''import triton
import triton.language as tl

SCALE = 2.0


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)
'''


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache_files, "_warned", set())
    return tmp_path


def fresh_load() -> Any:
    loader._loaded.clear()  # as a new process would: nothing loaded yet
    return loader.load(SOURCE, interpret=False)  # decorating needs no GPU


def warned(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [str(w.message) for w in caught if issubclass(w.category, td.TileDSLWarning)]


@pytest.mark.parametrize("edit, why", [
    (lambda s: s.replace("SCALE = 2.0", "SCALE = 3.0"), "not the source its name is the hash"),
    (lambda s: s[:40], "not the source its name is the hash"),  # truncated: a SyntaxError
    (lambda s: "", "it is empty"),
])
def test_an_edited_generated_module_is_rewritten_not_run(cache_dir: Path, edit: Callable,
                                                         why: str) -> None:
    fresh_load()
    (path,) = (cache_dir / "triton").glob("k_*.py")
    path.write_text(edit(SOURCE))
    module, messages = warned(fresh_load)
    assert module.SCALE == 2.0 and path.read_text() == SOURCE
    assert len(messages) == 1 and str(path) in messages[0] and why in messages[0]
    assert "double(x_ptr, n" in module.double.src  # Triton still reads the kernel's source
    assert warned(fresh_load)[1] == []  # rewritten: clean from now on


def test_result_cache_reads_only_regular_sealed_entries(cache_dir: Path) -> None:
    key = cache.CacheKey("kernel k, signature s")
    path = cache.store(key, td.Config((16,)), 1.0, "s")
    assert cache.load(key) == td.Config((16,))
    path.write_text(path.read_text().replace("16", "32"))  # the digest no longer matches
    assert warned(lambda: cache.load(key)) == (None, [
        f"tiledsl ignores the cache entry {path}: its content does not match its digest (it was "
        "modified); it is treated as missing (and rewritten where tiledsl writes it)"])
    assert warned(lambda: cache.load(key)) == (None, [])  # once per entry and reason
    path.unlink()
    os.mkfifo(path)  # opening it for reading would block until a writer came
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(warned(lambda: cache.load(key))),
                              daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert result and result[0][0] is None and "it is a FIFO, not a regular file" in result[0][1][0]
    cache.store(key, td.Config((8,)), 1.0, "s")  # a store replaces whatever is there
    assert path.is_file() and cache.load(key) == td.Config((8,))


def test_study_storage_that_is_not_a_file_is_refused(cache_dir: Path) -> None:
    os.mkfifo(cache_dir / "studies.db")
    with pytest.raises(td.ConfigError, match="studies.db is not a regular file"):
        default_storage()
