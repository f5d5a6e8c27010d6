"""Quality-diversity containers and operators of TeLAPA: the unstructured task archive
(`archive`) with its elites' lineage bitmasks (`lineage`) and stored episodes
(`trajectories`), archives as tables (`export`), parameter mutation with self-adapted
scales and the competence gate (`mutation`), candidate pooling, few-shot origin
selection and elite injection (`selection`), and their hyperparameters (`config`).

Functional style (QDax): archives are immutable pytrees and every operation returns a
new one; APIs are keyword-only past the main arguments and docstrings give the maths.
"""

from telapa.qd.archive import (
    ELITE_ID_BITS,
    Archive,
    ArchiveSpec,
    Elites,
    InsertInfo,
    InsertStatus,
    adapt_d_min,
    copy_archive,
    derived_spacing,
    drop_trajectories,
    elite_id_offset,
    init_archive,
    insert,
    insert_batch,
    make_elites,
    normalizer_hex,
    normalizer_words,
    repack,
    set_reference,
    split_elite_id,
)
from telapa.qd.config import (
    ArchiveConfig,
    IlluminationConfig,
    InjectionConfig,
    QDConfig,
    TransferConfig,
)
from telapa.qd.lineage import (
    lineage_bit,
    lineage_from_visits,
    lineage_visits,
    lineage_words,
    with_visit,
)
from telapa.qd.mutation import (
    Offspring,
    adapt_sigma,
    competence_gate,
    mutate,
    propose,
    schwefel_tau,
    select_parents,
)
from telapa.qd.selection import (
    ElitePool,
    ProbeResults,
    farthest_point_indices,
    few_shot_select,
    injection_scores,
    near_best,
    nearest_distance,
    pool_candidates,
    probe_summary,
    sample_injection,
    union,
)
from telapa.qd.trajectories import FeatureCodec, Trajectories, float16_codec

__all__ = [
    "ELITE_ID_BITS",
    "elite_id_offset",
    "split_elite_id",
    "Archive",
    "ArchiveConfig",
    "ArchiveSpec",
    "ElitePool",
    "Elites",
    "FeatureCodec",
    "IlluminationConfig",
    "InjectionConfig",
    "InsertInfo",
    "InsertStatus",
    "Offspring",
    "ProbeResults",
    "QDConfig",
    "Trajectories",
    "TransferConfig",
    "adapt_d_min",
    "derived_spacing",
    "adapt_sigma",
    "competence_gate",
    "copy_archive",
    "drop_trajectories",
    "farthest_point_indices",
    "few_shot_select",
    "float16_codec",
    "init_archive",
    "injection_scores",
    "insert",
    "insert_batch",
    "lineage_bit",
    "lineage_from_visits",
    "lineage_visits",
    "lineage_words",
    "make_elites",
    "mutate",
    "near_best",
    "nearest_distance",
    "normalizer_hex",
    "normalizer_words",
    "pool_candidates",
    "probe_summary",
    "propose",
    "repack",
    "sample_injection",
    "schwefel_tau",
    "select_parents",
    "set_reference",
    "union",
    "with_visit",
]
