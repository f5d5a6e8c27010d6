"""Analyses of TeLAPA runs (paper Sec. "Local transfer reveals failure mode of single-model
preservation", "Stepping-Stone Lineages Across Task Archives", App. "Geometry diagnostics
in the shared behavior space"): pure statistics over run tables, and their figures."""

from telapa.analysis.data import TeLAPARun, candidates_frame, elites_with_tags, load_telapa_run
from telapa.analysis.geometry import (
    centroid_distances,
    centroids,
    mean_separation,
    rms_radius,
    separation_ratio,
    tsne_embedding,
)
from telapa.analysis.lineage import ancestry_matrix, immediate_source_matrix, lineage_properties
from telapa.analysis.local_transfer import local_deltas, pair_statistics, summarize_pairs
from telapa.analysis.novelty import archive_novelty, normalized_novelty
from telapa.analysis.panels import analysis_figures, analysis_panels, analysis_tables

__all__ = [
    "TeLAPARun",
    "analysis_figures",
    "analysis_panels",
    "analysis_tables",
    "ancestry_matrix",
    "archive_novelty",
    "candidates_frame",
    "centroid_distances",
    "centroids",
    "elites_with_tags",
    "immediate_source_matrix",
    "lineage_properties",
    "load_telapa_run",
    "local_deltas",
    "mean_separation",
    "normalized_novelty",
    "pair_statistics",
    "rms_radius",
    "separation_ratio",
    "summarize_pairs",
    "tsne_embedding",
]
