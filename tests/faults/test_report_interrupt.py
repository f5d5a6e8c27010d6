"""Ctrl-C during ``telapa report`` (or ``play``, ``metrics``) printed a 90-line traceback;
it is one line, exit 130, for every command without a stop of its own."""

from __future__ import annotations

import argparse

import pytest

import telapa.cli as cli


def test_ctrl_c_in_a_command_is_one_line(monkeypatch, tmp_path, capsys):
    def interrupted(ns: argparse.Namespace) -> None:
        raise KeyboardInterrupt  # as Ctrl-C arrives in the middle of the report

    real = cli.build_parser

    def build() -> argparse.ArgumentParser:
        parser = real()
        (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices["report"].set_defaults(func=interrupted)
        return parser

    monkeypatch.setattr(cli, "build_parser", build)
    with pytest.raises(SystemExit) as stop:
        cli.main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert stop.value.code == 130
    assert capsys.readouterr().err == "telapa: error: interrupted; telapa report stopped\n"
