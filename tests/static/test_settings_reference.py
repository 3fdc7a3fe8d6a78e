"""`docs/settings.md` is what the Settings classes say: every variable, default and meaning.

A renamed variable or a changed default then shows up as a change of that page in review
(regenerate it: `python tools/settings_reference.py > docs/settings.md`), never by accident:
the Helm charts, the console and the connector-config mapping all read the same classes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_settings_page_is_generated_from_the_settings_classes() -> None:
    generated = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "settings_reference.py")], capture_output=True, text=True, check=True
    ).stdout
    committed = (ROOT / "docs" / "settings.md").read_text()
    assert generated == committed, "docs/settings.md is stale: python tools/settings_reference.py > docs/settings.md"
