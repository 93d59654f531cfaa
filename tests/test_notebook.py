"""docs/notebooks/quickstart.ipynb: stored without outputs, and executed cell by cell (nbclient) in a kernel of this
Python that imports this checkout's glm53, so that it cannot rot. The notebook works in a new folder under the
temporary folder, which here is the test's own: it writes nothing into the repository."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebooks" / "quickstart.ipynb"
CELL_TIMEOUT_S = 120
KERNEL = "glm53-notebook-test"


def test_the_notebook_is_stored_without_outputs():
    notebook = json.loads(NOTEBOOK.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, "".join(cell["source"])[:80]


def kernel_of_this_python(home: Path) -> None:
    """A kernel spec that starts sys.executable, found first on JUPYTER_PATH: not whatever `python3` kernel the
    user's Jupyter folders name (another environment's Python, with another glm53)."""
    spec = home / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "glm53 (tests)", "language": "python"}))


@pytest.mark.slow
def test_the_notebook_runs(tmp_path, monkeypatch, capsys):
    import nbformat
    from nbclient import NotebookClient

    jupyter, work = tmp_path / "jupyter", tmp_path / "work"
    work.mkdir()
    kernel_of_this_python(jupyter)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TMPDIR", str(work))  # where the notebook's first cell makes its folder
    # the kernel imports glm53 from this checkout, whichever one the environment installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("import glm53\nprint(glm53.__file__)"))
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name=KERNEL,
                            resources={"metadata": {"path": str(work)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start

    where = "".join(o.get("text", "") for o in notebook.cells[-1].outputs).strip()
    assert Path(where).resolve() == (ROOT / "glm53" / "__init__.py").resolve()
    [folder] = work.glob("glm53-quickstart-*")
    assert (folder / "runs" / "pretrain" / "report" / "REPORT.md").is_file()
    rl = json.loads((folder / "runs" / "rl" / "training-receipt.json").read_text())
    assert [(r["name"], r["weight"]) for r in rl["rewards"]] == [("binary", 1.0), ("__main__:length_penalty", 0.1)]
    assert (folder / "runs" / "rl" / "report" / "REPORT.md").is_file()
    with capsys.disabled():
        print(f"\n{NOTEBOOK.relative_to(ROOT)} executed in {elapsed:.1f} s")
