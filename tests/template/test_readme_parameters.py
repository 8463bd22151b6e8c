"""The README's list of parameters is the template's: none missing, none stale."""

from __future__ import annotations

import re
from pathlib import Path

from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
_HEADING = "### Parameters"


def _readme_table() -> dict[str, str]:
    """The README's parameter table: name to the default it states."""
    text = (ROOT / "README.md").read_text("utf-8")
    section = text.split(_HEADING, 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, str] = {}
    for row in rows:
        name, default, _meaning = (cell.strip() for cell in row.strip("|").split("|", 2))
        table[name.strip("`")] = default
    return table


def _template_parameters() -> dict[str, object]:
    parameters: dict[str, object] = yaml_parse((ROOT / "template.yaml").read_text("utf-8"))[
        "Parameters"
    ]
    return parameters


def test_the_readme_describes_every_template_parameter_and_no_other() -> None:
    assert sorted(_readme_table()) == sorted(_template_parameters())


def test_the_readme_states_each_parameters_default_as_the_template_sets_it() -> None:
    for name, parameter in _template_parameters().items():
        assert isinstance(parameter, dict)
        stated = _readme_table()[name]
        if "Default" not in parameter:
            assert stated == "required", name
        else:
            default = str(parameter["Default"])
            assert stated == (f"`{default}`" if default else "empty"), name


def test_the_readme_table_rows_name_one_parameter_each() -> None:
    for name in _readme_table():
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), name
