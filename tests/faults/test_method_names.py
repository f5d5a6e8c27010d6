"""A plug-in method's name names run and cell directories: ``x/../../ESCAPED`` with
``--seeds`` wrote outside ``--out``. Such a name is refused when the method registers."""

from __future__ import annotations

import pytest

from telapa.continual.methods import Finetune
from telapa.continual.registry import METHODS, register_method
from telapa.plugins import PluginError


@pytest.mark.parametrize("name", ["x/../../ESCAPED", "../up", "with space", "<b>bold</b>",
                                  "Upper", "-dash-first", "a" * 65])
def test_a_method_name_that_is_no_directory_name_is_refused(name):
    method = type("Escaping", (Finetune,), {"name": name, "__module__": __name__})
    with pytest.raises(PluginError, match="lower-case ASCII letters"):
        register_method(method)
    assert name not in METHODS


def test_a_plain_plug_in_name_still_registers():
    method = type("Plain", (Finetune,), {"name": "plain-name_2", "__module__": __name__})
    try:
        assert register_method(method) is method
    finally:
        METHODS.pop("plain-name_2", None)
