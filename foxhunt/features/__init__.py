"""Causal features: a named, versioned feature table (feature plugins add to it), its cache and its normaliser."""

from __future__ import annotations

from foxhunt.features.cache import FeatureCache, default_cache_dir
from foxhunt.features.compute import FeatureMatrix, compute_features
from foxhunt.features.config import FeatureConfig
from foxhunt.features.library import FEATURE_GROUPS, FEATURES, FeatureDef, parse_feature
from foxhunt.features.normalize import Normalizer
from foxhunt.features.sets import FEATURE_CODE_VERSION, FEATURE_SETS, FeatureSet, feature_set
from foxhunt.features.table import CORE_TABLE, FeatureTable

__all__ = [
    "CORE_TABLE",
    "FEATURES",
    "FEATURE_GROUPS",
    "FEATURE_CODE_VERSION",
    "FEATURE_SETS",
    "FeatureCache",
    "FeatureConfig",
    "FeatureDef",
    "FeatureMatrix",
    "FeatureSet",
    "FeatureTable",
    "Normalizer",
    "compute_features",
    "default_cache_dir",
    "feature_set",
    "parse_feature",
]
