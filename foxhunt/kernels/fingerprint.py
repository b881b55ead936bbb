"""A content fingerprint of a row function and of everything it compiles with.

The on-disk kernel cache (:mod:`foxhunt.kernels.launcher_cache`) files a compiled
launcher under this fingerprint, so the fingerprint must change whenever the
machine code could: an edit of the row function, of any helper it calls (in any
module), or of a constant it reads (``PS = device_constants(PS)``, a float
threshold), or a different numba or Python.

It hashes what numba compiles, not the source files: the loaded code objects
(bytecode, constants, names, recursively through nested code) and the values of
the globals they read. A source file edited after import therefore cannot put
new-looking source in front of old compiled code. Functions are followed through
module globals, through attributes of imported modules (``rng.hash3``), through
numba dispatchers (their ``py_func``), ``@intrinsic`` definitions and closure
cells; numba's, numpy's and the standard library's own functions are named, not
followed. Code that reaches a kernel only through numba's registries
(``@overload`` of some other function) is not seen: write kernel helpers with
``device_function`` (numba's ``register_jitable``), whose own body is followed.

A value the fingerprint cannot describe stably (an arbitrary object, whose
``repr`` may carry a memory address) makes the row uncacheable:
:class:`UncacheableRow` is raised and the caller compiles without the cache.
"""

from __future__ import annotations

import dis
import enum
import hashlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numba
import numpy as np

__all__ = ["UncacheableRow", "row_fingerprint", "enums_read"]

# Bumped when the fingerprint's encoding or the launcher template changes meaning.
FINGERPRINT_FORMAT = "foxhunt-kernel-fingerprint-1"
# Functions from these top-level packages are named, not followed: numba compiles
# them from its own (versioned) implementation, not from their Python bytecode.
_OPAQUE_PACKAGES = frozenset({"numba", "numpy", "llvmlite", "math", "cmath", "builtins", "operator", "torch"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


class UncacheableRow(Exception):
    """The row function reads a value whose identity cannot be fingerprinted across processes."""


def row_fingerprint(row: Callable[..., Any], extra: str = "") -> str:
    """Hex sha256 over ``row``, every function it reaches, the globals they read, numba and Python."""
    walker = _Walker()
    walker.function(row)
    digest = hashlib.sha256()
    for part in (FINGERPRINT_FORMAT, numba.__version__, np.__version__, sys.version, extra):
        digest.update(part.encode())
        digest.update(b"\0")
    for entry in walker.entries:
        digest.update(entry.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def enums_read(row: Callable[..., Any]) -> list[str]:
    """The enum tables and members ``row`` or a function it reaches reads, by qualified name, in walk order.

    numba.cuda cannot index an array with an ``IntEnum`` member (the CPU target can), so a row function
    that reads one compiles for the CPU and fails for a GPU. A row whose walk stops at a value the
    fingerprint cannot describe is reported as far as it was walked.
    """
    walker = _Walker()
    try:
        walker.function(row)
    except UncacheableRow:
        pass
    return list(dict.fromkeys(walker.enums))


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', getattr(obj, '__name__', None))}"


def _opaque(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".")[0] in _OPAQUE_PACKAGES


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


class _Walker:
    """Collects a deterministic list of text entries describing a function and what it reaches."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.enums: list[str] = []
        self._seen: set[int] = set()

    def function(self, fn: Any) -> str:
        """Describe a Python function (or a numba dispatcher's) and follow what it reads."""
        py_func = getattr(fn, "py_func", fn)
        name = f"function {_qualified(py_func)}"
        if _opaque(py_func) or not isinstance(py_func, types.FunctionType):
            return name
        if id(py_func) in self._seen:
            return name
        self._seen.add(id(py_func))
        self.entries.append(name)
        for code in _code_objects(py_func.__code__):
            self.entries.append(f"code {code.co_name} {code.co_code.hex()} {code.co_names} {code.co_varnames} "
                                f"{code.co_freevars} {[c for c in code.co_consts if not isinstance(c, types.CodeType)]!r}")
        for index, default in enumerate(py_func.__defaults__ or ()):
            self.entries.append(f"default {index} {self.value(default)}")
        for cell_name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
            self.entries.append(f"cell {cell_name} {self.value(cell.cell_contents)}")
        self._globals(py_func)
        return name

    def _globals(self, py_func: types.FunctionType) -> None:
        names = sorted({name for code in _code_objects(py_func.__code__) for name in code.co_names})
        modules: list[types.ModuleType] = []
        # co_names mixes global names with attribute names (``PS.WINS`` puts WINS there): only a name the
        # code loads as a global is one it reads, for the enum check.
        loaded = {ins.argval for code in _code_objects(py_func.__code__) for ins in dis.get_instructions(code)
                  if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        for name in names:
            if name in py_func.__globals__:
                value = py_func.__globals__[name]
                enums_before = len(self.enums)
                self.entries.append(f"global {name} {self.value(value)}")
                if name not in loaded:
                    del self.enums[enums_before:]
                if isinstance(value, types.ModuleType):
                    modules.append(value)
        # ``module.attribute`` reads: the attribute's name is in co_names too. Follow
        # them (to a fixpoint, for ``package.module.function``) unless the module is opaque.
        seen_modules: set[str] = set()
        while modules:
            module = modules.pop()
            if module.__name__ in seen_modules or module.__name__.split(".")[0] in _OPAQUE_PACKAGES:
                continue
            seen_modules.add(module.__name__)
            for name in names:
                if hasattr(module, name):
                    value = getattr(module, name)
                    self.entries.append(f"attribute {module.__name__}.{name} {self.value(value)}")
                    if isinstance(value, types.ModuleType):
                        modules.append(value)

    def value(self, value: Any) -> str:
        """A stable description of a value a kernel may read, following functions."""
        if isinstance(value, enum.Enum):
            self.enums.append(f"{_qualified(type(value))}.{value.name}")
            return f"enum {_qualified(type(value))}.{value.name}={value.value!r}"
        if isinstance(value, _SCALARS):
            return f"{type(value).__name__} {value!r}"
        if isinstance(value, (tuple, list)):
            # A namedtuple's field names matter: ``PS.EQUITY`` compiles to the position of the field.
            fields = getattr(value, "_fields", ())
            items = ", ".join(self.value(item) for item in value)
            return f"{_qualified(type(value))} {fields} ({items})"
        if isinstance(value, np.ndarray):
            return f"ndarray {value.dtype.str} {value.shape} {hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}"
        if isinstance(value, np.generic):
            return f"numpy {value.dtype.str} {value!r}"
        if isinstance(value, types.ModuleType):
            return f"module {value.__name__}"
        if isinstance(value, types.FunctionType) or hasattr(value, "py_func"):
            return self.function(value)
        if callable(getattr(value, "_defn", None)):
            # A numba ``@intrinsic``: its typing-and-codegen function decides the machine code.
            return f"intrinsic {self.function(value._defn)}"
        if isinstance(value, type) and issubclass(value, enum.Enum):
            # ``GammaSlot.HEALTH`` compiles to the member's value: a reordered table is a new kernel.
            self.enums.append(_qualified(value))
            members = ", ".join(f"{member.name}={member.value!r}" for member in value)
            return f"enum class {_qualified(value)} ({members})"
        if isinstance(value, types.BuiltinFunctionType) or _opaque(value):
            return f"object {_qualified(value)} of {_qualified(type(value))}"
        raise UncacheableRow(f"cannot fingerprint a value of type {_qualified(type(value))}")
