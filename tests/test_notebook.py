"""docs/quickstart.ipynb runs top to bottom in a fresh kernel (your own nn.Module, tensors,
colour-blocks and DLA, a bench table in pandas, a figure), and its DLA numbers are
`segtk attack`'s on the same images."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.cli import cli

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"
PER_IMAGE = "per-image adversarial mIoU %:"


def run_notebook(cwd: Path) -> list[str]:
    """Every output of the executed notebook as text (streams, results, figures' reprs)."""
    nbformat = pytest.importorskip("nbformat", reason="the test extra: pip install -e .[test]")
    nbclient = pytest.importorskip("nbclient", reason="the test extra: pip install -e .[test]")
    pytest.importorskip("pandas", reason="the notebook tabulates with pandas (the test extra)")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "the notebook is stored without outputs"
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text") or json.dumps(output.get("data", {})))
    return texts


def test_the_quickstart_notebook_runs_and_gives_the_cli_numbers(tmp_path: Path) -> None:
    outputs = "\n".join(run_notebook(tmp_path))
    assert "image/png" in outputs, "the notebook shows its figure inline"
    assert "colour-blocks" in outputs and "miou_mean" in outputs  # the bench table
    line = next(line for line in outputs.splitlines() if line.startswith(PER_IMAGE))
    mine = ast.literal_eval(line[len(PER_IMAGE):].strip())
    result = CliRunner().invoke(cli, ["attack", "--plugin", "dla", "--budget", "20", "--eps", "8",
                                      "--limit", "2", "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    records = [json.loads(r) for r in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    assert mine == [round(100 * r["adv_miou"], 4) for r in records]
    assert list(tmp_path.iterdir()) == [tmp_path / "cli"], "the notebook writes nothing"
