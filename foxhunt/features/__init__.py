"""Causal features: a named, versioned feature table, its cache and its normaliser."""

from __future__ import annotations

from foxhunt.features.cache import FeatureCache, default_cache_dir
from foxhunt.features.compute import FeatureMatrix, compute_features
from foxhunt.features.config import FeatureConfig
from foxhunt.features.library import FEATURES, parse_feature
from foxhunt.features.normalize import Normalizer
from foxhunt.features.sets import FEATURE_CODE_VERSION, FEATURE_SETS, FeatureSet, feature_set

__all__ = [
    "FEATURES",
    "FEATURE_CODE_VERSION",
    "FEATURE_SETS",
    "FeatureCache",
    "FeatureConfig",
    "FeatureMatrix",
    "FeatureSet",
    "Normalizer",
    "compute_features",
    "default_cache_dir",
    "feature_set",
    "parse_feature",
]
