"""Every data/features/folds module declares ``__all__`` and every exported name exists."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import foxhunt.data
import foxhunt.features

MODULES = [
    "foxhunt.folds",
    *(f"foxhunt.data.{m.name}" for m in pkgutil.iter_modules(foxhunt.data.__path__)),
    *(f"foxhunt.features.{m.name}" for m in pkgutil.iter_modules(foxhunt.features.__path__)),
    "foxhunt.data",
    "foxhunt.features",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_exports(name):
    module = importlib.import_module(name)
    assert isinstance(module.__all__, list) and module.__all__
    missing = [symbol for symbol in module.__all__ if not hasattr(module, symbol)]
    assert missing == []
