"""What a new user meets first: defaults that do not fail on the demo data, `--quiet` for
scripts, `predict` printing a table or JSON, one list separator per option, the light install
(requirements-light.txt) and `segtk plugins` naming what to install for a missing plugin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.commands import extras as extras_module
from segtk.commands.console import console
from segtk.commands.train import split_augments
from segtk.core import DataError, write_png
from segtk.core._plugins import reset_plugin_manager
from segtk.core._specs import preferred_split


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def run_config(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())["config"]


# --- the training split: train where the data has splits, else all of it ----------------------


def camvid(root: Path, splits: tuple[str, ...]) -> str:
    """A one-image CamVid (SegNet layout) with the given splits."""
    for split in splits:
        write_png(root / split / "a.png", np.zeros((4, 4, 3), np.uint8))
        write_png(root / f"{split}annot" / "a.png", np.zeros((4, 4), np.uint8))
    return f"camvid:{root}"


def test_train_without_split_on_data_without_splits_trains_on_all_of_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke("train", "--model", "demo", "--data", "demo", "--limit", "2",
                    "--batch-size", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert run_config(out)["split"] is None


def test_a_split_the_user_typed_is_still_checked() -> None:
    result = invoke("train", "--model", "demo", "--data", "demo", "--split", "train",
                    "--out", "unused")
    assert result.exit_code == 1
    assert "unknown split 'train'" in result.output and "drop --split" in result.output


def test_preferred_split_is_taken_where_the_data_has_splits(tmp_path: Path) -> None:
    assert preferred_split(camvid(tmp_path / "both", ("train", "val")), "train") == "train"
    assert preferred_split("demo", "train") is None
    with pytest.raises(DataError, match=r"unknown split 'train'.*available: val") as exc:
        preferred_split(camvid(tmp_path / "val-only", ("val",)), "train")
    assert "pass --split" in (exc.value.hint or "")


# --- segtk edit --filter surrogate: the error says what to add, and what it says works --------


def test_surrogate_without_a_model_says_what_to_add_and_the_advice_runs(tmp_path: Path) -> None:
    command = ["edit", "--plugin", "material", "--filter", "surrogate", "--limit", "1",
               "--sheet-rows", "0", "--out", str(tmp_path / "edit")]
    result = invoke(*command)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "add --filter-param surrogate.model=SPEC" in text
    advice = re.search(r"(--filter-param surrogate\.model=\S+) on the demo data", text)
    assert advice, text
    fixed = invoke(*command, *advice.group(1).split(" ", 1))
    assert fixed.exit_code == 0, fixed.output
    used = run_config(tmp_path / "edit")["filters"]["surrogate"]["model"]
    assert f"surrogate.model={used}" == advice.group(1).split(" ", 1)[1]


# --- --quiet: no progress bar, no table; only the result lines --------------------------------

RESULT_LINE = re.compile(r"(results|report|edited dataset|originals|contact sheet|model): \S+"
                         r"|wrote \S+")
QUIET_RUNS = {
    "attack": ["attack", "--plugin", "dla", "--budget", "3", "--limit", "1"],
    "bench attacks": ["bench", "attacks", "--attacks", "random", "--budgets", "2",
                      "--repeats", "1", "--limit", "1", "--executor", "inline"],
    "edit": ["edit", "--plugin", "color", "--values", "red", "--limit", "2"],
    "bench edits": ["bench", "edits", "--attributes", "color", "--values", "color=red",
                    "--limit", "2", "--executor", "inline"],
    "train": ["train", "--model", "demo", "--data", "demo", "--limit", "2"],
    "bench augment": ["bench", "augment", "--model", "demo", "--data", "demo", "--augment",
                      "baseline", "--attributes", "color", "--values", "color=red", "--limit", "2",
                      "--eval-limit", "2"],
}


@pytest.mark.parametrize("command", list(QUIET_RUNS))
def test_quiet_prints_only_the_result_lines(command: str, tmp_path: Path) -> None:
    result = invoke(*QUIET_RUNS[command], "--out", str(tmp_path / "out"), "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no progress bar
    lines = result.stdout.splitlines()
    assert lines and all(RESULT_LINE.fullmatch(line) for line in lines), result.stdout
    for line in lines:  # each names a file or folder the run wrote (a model spec: its weights)
        value = line.removeprefix("wrote ").split(": ", 1)[-1]
        assert Path(value.split(":", 1)[1] if line.startswith("model: ") else value).exists()


def test_without_quiet_the_same_run_shows_its_table_and_progress(tmp_path: Path) -> None:
    result = invoke(*QUIET_RUNS["attack"], "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "dataset mIoU" in result.stdout and "dla" in result.stderr
    assert not all(RESULT_LINE.fullmatch(line) for line in result.stdout.splitlines())


# --- predict: a table, or with --json one JSON line --------------------------------------------


def test_predict_prints_a_table_or_json_never_both() -> None:
    table = invoke("predict", "--limit", "2")
    assert table.exit_code == 0, table.output
    assert "mIoU %" in table.stdout and "{" not in table.stdout
    as_json = invoke("predict", "--limit", "2", "--json", "--quiet")
    assert as_json.exit_code == 0, as_json.output
    assert as_json.stderr == "" and len(as_json.stdout.splitlines()) == 1
    summary = json.loads(as_json.stdout)
    assert summary["images"] == 2 and f"{100 * summary['miou']:.2f}" in table.stdout


# --- list options: one separator each, said in --help -----------------------------------------

# segtk's options that take a comma-separated list (the repeatable ones are found by themselves)
COMMA_LISTS = {
    "bench attacks": ["--attacks", "--budgets", "--eps"],
    "bench edits": ["--models", "--attributes", "--filters"],
    "bench augment": ["--augment", "--attributes"],
    "edit": ["--values", "--exclude", "--classes"],
}


def own_commands(group: click.Group, path: str = ""):
    """(name, command) of every segtk command (plugins' commands are theirs to document)."""
    for name, command in group.commands.items():
        full = f"{path} {name}".strip()
        if isinstance(command, click.Group):
            yield from own_commands(command, full)
        elif (command.callback.__module__ or "").startswith("segtk.commands"):
            yield full, command


def options(command: click.Command) -> dict[str, click.Option]:
    return {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}


def test_every_repeatable_option_says_so_in_its_help() -> None:
    unsaid = [f"{name} {opt}" for name, command in own_commands(cli)
              for opt, p in options(command).items()
              if p.multiple and "repeat" not in (p.help or "").lower()]
    assert not unsaid


def test_every_comma_list_option_says_so_in_its_help() -> None:
    commands = dict(own_commands(cli))
    unsaid = [f"{name} {opt}" for name, opts in COMMA_LISTS.items() for opt in opts
              if "comma" not in (options(commands[name])[opt].help or "").lower()]
    assert not unsaid


@pytest.mark.parametrize(("value", "specs"), [
    ("baseline,cutout,cutmix,augmix", ["baseline", "cutout", "cutmix", "augmix"]),
    ("baseline,cutmix:alpha=1,p=0.5,edits:dir=A;B,p=0.3,augmix",
     ["baseline", "cutmix:alpha=1,p=0.5", "edits:dir=A;B,p=0.3", "augmix"]),
    ("edits:dir=runs/a+b", ["edits:dir=runs/a+b"]),
])
def test_bench_augment_takes_commas_between_and_inside_specs(value: str, specs: list[str]) -> None:
    assert split_augments(value) == specs


def test_bench_augment_refuses_the_plus_separator_in_one_line() -> None:
    result = invoke("bench", "augment", "--model", "demo", "--data", "demo",
                    "--augment", "baseline+cutmix", "--out", "unused")
    assert result.exit_code == 1
    assert "separate the augmentations with ','" in result.output and "hint:" in result.output


# --- the light install and the extras ----------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"ray", "transformers", "diffusers", "huggingface-hub", "onnx", "onnxruntime",
         "onnxscript", "opencv-python", "opencv-python-headless", "albumentations", "mmcv",
         "mmengine", "mmsegmentation", "detectron2", "torchvision", "uvicorn", "starlette",
         "scipy"}


# HEAVY by import name, and matplotlib (only the benchmarks draw with it): the main job imports
# none of them.
HEAVY_MODULES = {"ray", "transformers", "diffusers", "huggingface_hub", "onnx", "onnxruntime",
                 "onnxscript", "cv2", "albumentations", "mmcv", "mmengine", "mmseg", "detectron2",
                 "torchvision", "uvicorn", "starlette", "scipy", "matplotlib"}


def name(requirement: str) -> str:
    """'Foo_Bar[x]==1.0; extra == "y"' -> 'foo-bar' (PEP 503 normalised)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0]).lower()


def pyproject(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def installs(file: Path) -> tuple[set[str], set[str]]:
    """(plugin folders, third-party names) a requirements file installs: its lines, the
    dependencies its editable folders declare and the root extras it names."""
    folders, names = set(), set()
    for line in file.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        if not line.startswith("-e "):
            names.add(name(line))
            continue
        path, _, extras = line.removeprefix("-e ").strip().partition("[")
        project = pyproject(ROOT / path)
        declared = list(project.get("dependencies", []))
        for extra in filter(None, extras.rstrip("]").split(",")):
            declared += project["optional-dependencies"][extra.strip()]
        names |= {name(d) for d in declared} - {"segtk"}
        if path != ".":
            folders.add(path)
            names -= {name(project["name"])}
    names = {n for n in names if not n.startswith("segtk-")}  # plugins named by their folders
    return folders, names


def extras_files() -> list[Path]:
    return sorted((ROOT / "extras").glob("*.txt"))


def test_the_light_install_has_the_main_job_and_nothing_heavy() -> None:
    folders, names = installs(ROOT / "requirements-light.txt")
    attacks = {f"plugins/attacks/{p.parent.name}" for p in (ROOT / "plugins" / "attacks").glob("*/pyproject.toml")}
    assert {"plugins/models/demo", "plugins/models/espnet"} | attacks <= folders
    assert "torch" in names and "jinja2" in names  # the core and its reports
    assert not names & HEAVY
    full_folders, full_names = installs(ROOT / "requirements.txt")
    assert folders <= full_folders and names <= full_names  # requirements.txt: everything


def test_every_plugin_of_requirements_txt_is_light_or_in_one_extra() -> None:
    light, _ = installs(ROOT / "requirements-light.txt")
    full_folders, full_names = installs(ROOT / "requirements.txt")
    owners: dict[str, list[str]] = {}
    for file in extras_files():
        folders, names = installs(file)
        assert folders <= full_folders and names <= full_names, file.name
        for folder in folders:
            owners.setdefault(folder, []).append(file.name)
    for folder in sorted(full_folders - light):
        assert len(owners.get(folder, [])) == 1, (
            f"{folder} is in requirements.txt: add it to requirements-light.txt (no heavy "
            f"dependency) or to one extras/NAME.txt (found in {owners.get(folder, [])})")
    assert {"hf", "onnx", "edit", "ray", "mmseg", "detectron2"} <= {f.stem for f in extras_files()}


# --- segtk plugins: what to install for a plugin that lacks a dependency or is not installed ----


def fake_distribution(root: Path, dist: str, module: str, source: str, requires: str = "") -> None:
    """An installed distribution (module + .dist-info with an entry point) in `root`."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n"
    (info / "METADATA").write_text(metadata + "".join(f"Requires-Dist: {r}\n" for r in
                                                      filter(None, [requires])))
    (info / "entry_points.txt").write_text(f"[segtk]\n{module} = {module}\n")


@pytest.fixture
def plugins_lacking_modules(tmp_path: Path, monkeypatch):
    """segtk-needs-dep imports a module no distribution installs, and declares the requirement
    that would; segtk-own-bug imports a module of its own that does not exist."""
    fake_distribution(tmp_path, "segtk-needs-dep", "segtk_needs_dep",
                      "import segtk_absent_module_q\n", requires="segtk-absent-dist-q==2.0")
    fake_distribution(tmp_path, "segtk-own-bug", "segtk_own_bug", "import segtk_own_bug.typo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def test_a_plugin_whose_import_lacks_a_module_is_listed_with_what_to_install(
        plugins_lacking_modules, monkeypatch) -> None:
    rows = {r["name"]: r for r in json.loads(invoke("plugins", "--json").stdout)}
    needs = rows["segtk_needs_dep"]
    assert needs["status"] == "missing dependency" and needs["missing"] == "segtk_absent_module_q"
    assert needs["install"] == "pip install segtk-absent-dist-q==2.0"  # from its own metadata
    assert rows["segtk_own_bug"]["status"] == "broken"  # its own module: a bug, not a dependency
    monkeypatch.setattr(console, "_width", 200)  # one table row per plugin
    (line,) = [x for x in invoke("plugins").stdout.splitlines() if "segtk_needs_dep" in x]
    assert "segtk_absent_module_q: pip install segtk-absent-dist-q==2.0" in line


def test_a_plugin_that_is_not_installed_is_listed_with_its_extra(tmp_path: Path,
                                                                 monkeypatch) -> None:
    folder = tmp_path / "plugins" / "models" / "absent"
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "segtk-absent-plugin-q"\ndependencies = ["segtk"]\n\n'
        '[project.entry-points.segtk]\nabsent = "segtk_absent"\n')
    (tmp_path / "extras").mkdir()
    (tmp_path / "extras" / "big.txt").write_text("huge==1.0\n-e plugins/models/absent\n")
    (tmp_path / "extras" / "built.txt").write_text(
        "# install: bash scripts/build.sh\n-e plugins/models/absent\n")
    monkeypatch.setattr(extras_module, "CHECKOUT", tmp_path)
    rows = [r for r in json.loads(invoke("plugins", "--json").stdout)
            if r["distribution"] == "segtk-absent-plugin-q"]
    assert [(r["name"], r["status"], r["install"]) for r in rows] == [
        ("absent", "not installed", "pip install -r extras/big.txt"),
        ("absent", "not installed", "bash scripts/build.sh")]


def test_using_a_plugin_that_is_not_installed_says_which_extra_installs_it(
        tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "plugins" / "attacks" / "absent"
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "segtk-attack-absent-q"\n\n'
        '[project.entry-points.segtk]\nabsent-q = "segtk_attack_absent_q"\n')
    (tmp_path / "extras").mkdir()
    (tmp_path / "extras" / "more.txt").write_text("-e plugins/attacks/absent\n")
    monkeypatch.setattr(extras_module, "CHECKOUT", tmp_path)
    result = invoke("attack", "--plugin", "absent-q", "--out", str(tmp_path / "run"))
    assert result.exit_code == 1
    assert "no attack plugin named 'absent-q': segtk-attack-absent-q is not installed" in \
        " ".join(result.output.split())
    assert "hint: pip install -r extras/more.txt" in result.output


def test_startup_imports_no_optional_stack() -> None:
    """`segtk` with every plugin registered (what `segtk plugins` and each command do first)
    loads none of the heavy optional libraries: only the command that needs one imports it."""
    optional = ["transformers", "diffusers", "huggingface_hub", "onnx", "onnxruntime", "cv2",
                "albumentations", "ray", "matplotlib", "uvicorn", "starlette", "mmcv", "mmseg",
                "detectron2", "scipy"]
    code = ("import sys, segtk.cli; from segtk.core import registry; segtk.cli.pm_commands(); "
            "registry.plugins(); print(' '.join(m for m in sys.argv[1:] if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *optional], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.stdout.split() == []


def test_the_main_job_imports_nothing_the_light_install_lacks(tmp_path: Path) -> None:
    """`segtk attack --plugin dla` on the demo with its report, `segtk report` and `segtk plugins`
    run in one process and load none of the libraries only requirements.txt or an extra installs
    (scipy, matplotlib, ...): the light install is enough for the main job."""
    absent = sorted(HEAVY_MODULES)
    run = str(tmp_path / "run")
    jobs = [["attack", "--plugin", "dla", "--limit", "2", "--budget", "3", "--out", run,
             "--report", "-q"], ["report", run], ["plugins"]]
    code = ("import json, sys, segtk.cli\n"
            "jobs, absent, codes = json.loads(sys.argv[1]), json.loads(sys.argv[2]), []\n"
            "for args in jobs:\n"
            "    sys.argv = ['segtk', *args]\n"
            "    try:\n"
            "        segtk.cli.main()\n"
            "    except SystemExit as exc:\n"
            "        codes.append(exc.code)\n"
            "print(json.dumps([codes, [m for m in absent if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(jobs), json.dumps(absent)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    codes, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert codes == [0, 0, 0], out.stdout + out.stderr
    assert (tmp_path / "run" / "report.html").is_file()
    assert imported == []


def test_checking_a_required_submodule_does_not_import_its_package(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """A plugin that requires "pkg._ext" (mmseg requires mmcv._ext) is checked at start-up
    without running pkg/__init__.py, which may pull in a heavy stack (mmcv imports cv2)."""
    pkg = tmp_path / "heavypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('heavypkg was imported')\n")
    (pkg / "_ext.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    from segtk.core import missing_modules
    assert missing_modules(("heavypkg", "heavypkg._ext")) == []
    assert missing_modules(("heavypkg._nope", "nopkg_at_all._ext")) == ["heavypkg._nope",
                                                                         "nopkg_at_all._ext"]
    assert "heavypkg" not in sys.modules
