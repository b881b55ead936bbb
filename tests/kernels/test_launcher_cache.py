"""The on-disk cache of CPU launchers: loads across compiles, follows code edits, survives damaged files."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from foxhunt.kernels import Backend, DualKernel
from foxhunt.kernels.launcher_cache import KERNEL_CACHE_ENV, kernel_cache_dir

N_ROWS = 5


def _write_module(directory: Path, name: str, source: str) -> ModuleType:
    """(Re)load ``name`` from ``directory/name.py`` holding ``source``, as an edited source file would be."""
    path = directory / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _rows_with_helper(directory: Path, suffix: str, factor: float) -> ModuleType:
    # The row lives in one module and its helper in another: an edit of the helper
    # alone must reach the compiled launcher (the stale-physics case).
    helper = f"cache_helper_{suffix}"
    _write_module(directory, helper, f"""
        from foxhunt.kernels import device_function

        @device_function
        def scaled(x):
            return x * {factor!r}
    """)
    return _write_module(directory, f"cache_rows_{suffix}", f"""
        from foxhunt.kernels import device_function
        from {helper} import scaled

        @device_function
        def scale_row(i, args):
            x, out = args
            out[i] = scaled(x[i])
    """)


RowsFactory = Callable[[float], ModuleType]


@pytest.fixture()
def rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RowsFactory:
    """``rows(factor)``: (re)writes and loads a row module whose helper multiplies by ``factor``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    suffix = uuid.uuid4().hex[:8]
    return lambda factor: _rows_with_helper(tmp_path, suffix, factor)


@pytest.fixture()
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KERNEL_CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "kernels"


def _run(kernel: DualKernel) -> torch.Tensor:
    x = torch.arange(N_ROWS, dtype=torch.float64)
    out = torch.zeros(N_ROWS, dtype=torch.float64)
    kernel.launch(Backend.CPU, N_ROWS, (x, out))
    return out


def _hits(kernel: DualKernel) -> int:
    return sum(kernel.cpu.stats.cache_hits.values())


def _misses(kernel: DualKernel) -> int:
    return sum(kernel.cpu.stats.cache_misses.values())


def test_a_second_compile_loads_the_launcher_from_disk(cache_root: Path, rows: RowsFactory) -> None:
    module = rows(2.0)
    first = DualKernel(module.scale_row, "test.cache.scale")
    assert torch.equal(_run(first), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert (_hits(first), _misses(first)) == (0, 1)
    assert first.cpu_cache.directory is not None and first.cpu_cache.directory.parent == cache_root

    # A new DualKernel gets a new numba dispatcher, as a new process would: it must load, not compile.
    second = DualKernel(module.scale_row, "test.cache.scale")
    assert torch.equal(_run(second), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert (_hits(second), _misses(second)) == (1, 0)
    assert second.cpu_cache.directory == first.cpu_cache.directory
    assert set(second.cpu_cache.files()) == set(first.cpu_cache.files())


_SECOND_PROCESS = """
import sys, torch
from foxhunt.kernels import Backend, DualKernel
module = __import__(sys.argv[1])
kernel = DualKernel(module.scale_row, "test.cache.scale")
x = torch.arange(5, dtype=torch.float64)
out = torch.zeros(5, dtype=torch.float64)
kernel.launch(Backend.CPU, 5, (x, out))
print(sum(kernel.cpu.stats.cache_hits.values()), sum(kernel.cpu.stats.cache_misses.values()), out.tolist())
"""


def test_another_process_loads_the_launcher_this_one_compiled(cache_root: Path, rows: RowsFactory,
                                                              tmp_path: Path) -> None:
    module = rows(2.0)
    first = DualKernel(module.scale_row, "test.cache.scale")
    _run(first)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]), PYTHONHASHSEED="7")
    other = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, module.__name__], env=env, capture_output=True,
                           text=True, check=True)
    hits, misses, values = other.stdout.split(maxsplit=2)
    assert (int(hits), int(misses)) == (1, 0), other.stderr
    assert values.strip() == str([2.0 * i for i in range(N_ROWS)])


def test_another_process_half_written_cache_file_is_left_alone(cache_root: Path, rows: RowsFactory) -> None:
    # numba writes through "<file>.tmp.<id>" and renames it; deleting one would break that process's compile.
    module = rows(2.0)
    first = DualKernel(module.scale_row, "test.cache.scale")
    _run(first)
    index = next(name for name in first.cpu_cache.files() if name.endswith(".nbi"))
    in_flight = Path(first.cpu.stats.cache_path) / f"{index}.tmp.0123456789abcdef"
    in_flight.write_bytes(b"being written by another process")
    second = DualKernel(module.scale_row, "test.cache.scale")
    assert torch.equal(_run(second), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert in_flight.exists()
    assert (_hits(second), _misses(second)) == (1, 0)


def test_editing_a_helper_compiles_a_new_launcher(cache_root: Path, rows: RowsFactory) -> None:
    before = DualKernel(rows(2.0).scale_row, "test.cache.scale")
    _run(before)
    after = DualKernel(rows(3.0).scale_row, "test.cache.scale")
    assert torch.equal(_run(after), 3.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert (_hits(after), _misses(after)) == (0, 1)
    assert after.cpu_cache.directory != before.cpu_cache.directory
    assert len(list(cache_root.iterdir())) == 2


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:7])


@pytest.mark.parametrize(("suffix", "damage"), [(".nbc", _flip_a_byte), (".nbi", _truncate), (".nbi", _flip_a_byte)])
def test_a_damaged_cache_file_is_recompiled_not_loaded(cache_root: Path, rows: RowsFactory, suffix, damage) -> None:
    module = rows(2.0)
    first = DualKernel(module.scale_row, "test.cache.scale")
    _run(first)
    damaged = [path for path in first.cpu_cache.files() if path.endswith(suffix)]
    assert damaged, "the compile must have written numba cache files"
    cache_path = Path(first.cpu.stats.cache_path)
    for name in damaged:
        damage(cache_path / name)

    second = DualKernel(module.scale_row, "test.cache.scale")
    assert torch.equal(_run(second), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert (_hits(second), _misses(second)) == (0, 1)
    # The recompile vouched for its files again: the next one loads.
    third = DualKernel(module.scale_row, "test.cache.scale")
    assert torch.equal(_run(third), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert (_hits(third), _misses(third)) == (1, 0)


def test_an_unwritable_cache_directory_still_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      rows: RowsFactory) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(KERNEL_CACHE_ENV, str(blocker))
    kernel = DualKernel(rows(2.0).scale_row, "test.cache.scale")
    assert torch.equal(_run(kernel), 2.0 * torch.arange(N_ROWS, dtype=torch.float64))
    assert kernel.cpu_cache.directory is None


def test_the_cache_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KERNEL_CACHE_ENV, raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert kernel_cache_dir() == Path.home() / ".cache" / "foxhunt" / "kernels"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert kernel_cache_dir() == tmp_path / "numba" / "foxhunt-kernels"
    monkeypatch.setenv(KERNEL_CACHE_ENV, str(tmp_path / "foxhunt"))
    assert kernel_cache_dir() == tmp_path / "foxhunt" / "kernels"
