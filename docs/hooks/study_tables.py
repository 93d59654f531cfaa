"""mkdocs hooks of the glm53 site.

1. Fills each study page's `<!-- study-table ... -->` markers with tables generated from the study's kept record
   (docs/studies/NAME/analysis.json and receipts), by the code of scripts/docs_study_tables.py, at every build.
   Offline, no training: the record is read, never recomputed.
2. The API pages render glm53's docstrings, which write tensor shapes and nested keys as `x[B, T][D]`; Markdown
   reads two adjacent bracket groups as a reference link and mkdocs-autorefs then warns that the "target" does not
   exist. Those messages, and only those whose source is a docstring under glm53/, are logged as INFO so that
   `mkdocs build --strict` still fails on every other warning (a broken link on a page included).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_study_tables", _ROOT / "scripts" / "docs_study_tables.py")
study_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study_tables)


class _DocstringBracketsAsInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if (record.levelno == logging.WARNING and "Could not find cross-reference target" in text
                and f"from {_ROOT / 'glm53'}/" in text):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


for _name in ("mkdocs.plugins.mkdocs_autorefs._internal.plugin", "mkdocs.plugins.mkdocs_autorefs.plugin"):
    logging.getLogger(_name).addFilter(_DocstringBracketsAsInfo())


def on_page_markdown(markdown, page, config, files, **kwargs):
    return study_tables.expand_markers(markdown, Path(config["docs_dir"]) / "studies")
