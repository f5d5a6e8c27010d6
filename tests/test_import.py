"""Importing telapa does no JAX work: the backend starts at a first computation, so a
user's (or the test suite's) XLA_FLAGS and platform settings made after ``import telapa``
still apply. (A module-level ``jnp`` constant in telapa.rl.policy started it.)"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from telapa.rl.policy import _LOG_2PI_E

MODULES = ("telapa", "telapa.cli", "telapa.continual.runner", "telapa.continual.batch",
           "telapa.continual.registry", "telapa.envs", "telapa.report", "telapa.rl.policy")


def test_importing_telapa_does_not_start_the_jax_backend():
    code = ("import importlib\nfrom jax._src import xla_bridge\n"
            f"for name in {MODULES!r}:\n"
            "    importlib.import_module(name)\n"
            "    assert not xla_bridge._backends, f'importing {name} started JAX'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_reports_and_the_cli_import_neither_scipy_stats_nor_scikit_learn():
    """Both take a second to import; the functions that use them import them (t-SNE
    panels, `telapa.metrics.stats`), so a report of baselines or a `telapa run` pays
    neither."""
    code = ("import sys\nimport telapa.cli, telapa.report.build, telapa.analysis\n"
            "loaded = sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules)\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_run_presets_are_complete_without_importing_the_registry():
    """`RunConfig` holds every built-in method's section when its own module is imported
    (no import of the registry or of ``telapa.continual`` builds it first)."""
    code = ("import sys\nfrom telapa.continual.preset import RunConfig, load_run_config\n"
            "config = load_run_config('quick')\n"
            "assert config.methods.ewc.lam == 10.0 and config.methods.telapa.qd\n"
            "assert 'telapa.continual.registry' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_gaussian_entropy_constant_is_log_2_pi_e_in_float32():
    # 1 + log(2 pi) = 1 + 1.8378770664093453, rounded to float32 as jnp.log gave it
    assert _LOG_2PI_E == float(np.float32(2.8378770664093453)) == 2.837877035140991


def test_the_former_telapa_package_path_imports_the_moved_modules_with_a_warning():
    """TeLAPA moved to ``telapa.continual.methods.telapa``; a plug-in importing it by the
    former path (``telapa.continual.telapa.method``) gets the same classes, warned."""
    code = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from telapa.continual.telapa.method import TeLAPA
    from telapa.continual.telapa import transfer
import telapa.continual.methods.telapa.method as moved
import telapa.continual.methods.telapa.transfer as moved_transfer
assert TeLAPA is moved.TeLAPA and transfer is moved_transfer
assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
    "telapa.continual.telapa moved to telapa.continual.methods.telapa; import it from there"]
"""
    subprocess.run([sys.executable, "-c", code], check=True)
