"""QD / transfer hyperparameters: paper defaults, documented choices, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from telapa.config import ConfigError, validate
from telapa.qd import ArchiveConfig, ArchiveSpec, QDConfig


def test_paper_defaults():
    c = QDConfig()
    assert c.archive.target_size == 256 and c.archive.max_size == 384
    assert c.archive.d_min == pytest.approx(0.10)
    il = c.illumination
    assert (il.iterations, il.eval_episodes, il.sigma0) == (1000, 50, 0.05)
    assert il.stored_episodes == 50 and il.traj_steps == 256
    assert c.injection.p_inj == 0.0
    t = c.transfer
    assert t.w_final + t.w_slope + t.w_auc == pytest.approx(1.0)
    m = QDConfig.for_domain("mujoco").illumination
    assert (m.iterations, m.eval_episodes, m.sigma0) == (200, 5, 0.02)
    assert m.sigma_min == pytest.approx(0.002) and m.sigma_max == pytest.approx(0.2)


def test_capacity_follows_target_unless_overridden():
    assert ArchiveConfig(target_size=100).max_size == 150
    assert ArchiveConfig(target_size=100, capacity=120).max_size == 120
    with pytest.raises(ValidationError):
        ArchiveConfig(target_size=100, capacity=50)


def test_spec_from_config():
    spec = QDConfig().archive_spec(n_params=10, lineage_words=2)
    assert (spec.capacity, spec.target_size, spec.lineage_words) == (384, 256, 2)
    # the documented d_min controller (paper d_min = 0.10; our choices a = 0.05, r_0 = 0.8,
    # clamps [1e-3, 10]), in the config, in the spec it builds and in a bare spec
    documented = (0.10, 0.05, 0.8, 1e-3, 10.0)
    for s in (spec, ArchiveSpec(n_params=10)):
        assert (s.d_min0, s.d_min_step, s.fill_rate, s.d_min_floor, s.d_min_ceil) == documented
    a = QDConfig().archive
    assert (a.d_min, a.d_min_step, a.fill_rate, a.d_min_floor, a.d_min_ceil) == documented
    # every archive setting reaches the spec
    custom = validate(QDConfig, {"archive": {
        "target_size": 40, "capacity": 50, "d_min": 0.3, "d_min_step": 0.1, "fill_rate": 0.5,
        "d_min_floor": 0.01, "d_min_ceil": 2.0}}, "qd.yaml")
    spec = custom.archive_spec(n_params=7, desc_dim=3, raw_dim=9)
    assert (spec.n_params, spec.desc_dim, spec.raw_dim, spec.capacity, spec.target_size) == (
        7, 3, 9, 50, 40)
    assert (spec.d_min0, spec.d_min_step, spec.fill_rate, spec.d_min_floor, spec.d_min_ceil) == (
        0.3, 0.1, 0.5, 0.01, 2.0)


def test_strict_validation_names_key():
    with pytest.raises(ConfigError, match="illumination.sigm"):
        validate(QDConfig, {"illumination": {"sigm0": 0.1}}, "qd.yaml")
    with pytest.raises(ConfigError, match="transfer.epsilon"):
        validate(QDConfig, {"transfer": {"epsilon": 2.0}}, "qd.yaml")
    with pytest.raises(ConfigError):
        validate(QDConfig, {"transfer": {"w_final": 0, "w_slope": 0, "w_auc": 0}}, "qd.yaml")
    with pytest.raises(ConfigError):
        validate(QDConfig, {"illumination": {"traj_episodes": 60}}, "qd.yaml")
    c = validate(QDConfig, {"injection": {"p_inj": 0.1}}, "qd.yaml")
    assert c.injection.p_inj == 0.1
