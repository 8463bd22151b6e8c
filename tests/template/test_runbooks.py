"""Every alarm in template.yaml has its runbook in docs/operations.md.

Each section says what the alarm means, the first command to run, how to
resolve it and when it clears, under an anchor named for the alarm's logical
id, so an alarm added to the template without its runbook fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]
_ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
_PARTS = ("**What it means.**", "**First command.**", "**Resolve.**", "**Clears.**")


def _alarms() -> list[str]:
    template = yaml_parse((ROOT / "template.yaml").read_text("utf-8"))
    return sorted(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in _ALARM_TYPES
    )


def _sections() -> dict[str, str]:
    """Each ``### `Name` `` section of docs/operations.md, by the anchor above it."""
    text = (ROOT / "docs" / "operations.md").read_text("utf-8")
    found = re.finditer(
        r'<a id="([a-z0-9-]+)"></a>\n### `(\w+)`\n(.*?)(?=\n<a id=|\n## |\n### |\Z)', text, re.S
    )
    return {match[2]: f"{match[1]}\n{match[3]}" for match in found}


def test_the_template_has_alarms_to_hold_to_it() -> None:
    assert len(_alarms()) >= 9


@pytest.mark.parametrize("alarm", _alarms())
def test_every_alarm_has_its_runbook(alarm: str) -> None:
    sections = _sections()
    assert alarm in sections, f"docs/operations.md has no section for {alarm}"
    anchor, body = sections[alarm].split("\n", 1)
    assert anchor == alarm.lower()
    for part in _PARTS:
        assert part in body, f"{alarm}'s runbook lacks {part}"
    first = body.split("**First command.**", 1)[1]
    assert first.lstrip().startswith("```sh\n"), f"{alarm}: the first command is a shell block"


def test_no_runbook_is_for_an_alarm_the_template_does_not_have() -> None:
    assert set(_sections()) <= set(_alarms())
