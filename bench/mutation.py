"""Mutation testing of the modules that carry segtk's guarantees (driver of bench/mutation.sh).

mutmut (pinned in the `test` extra) changes one small thing at a time in a module (`<` for
`<=`, a constant, a dropped argument), runs the tests that cover the changed function, and
counts a mutant as killed when a test fails. A surviving mutant is a change no test noticed:
either a missing test, or an equivalent mutant (the program means the same), which
bench/mutation-equivalent.txt lists with the reason.

mutmut wants the package below its working folder, but segtk's root *is* the package
(package-dir "." -> segtk), so each group is laid out in a scratch folder as segtk/ (and
segtk_http/ for the server's limits) next to the tests it runs; the checkout is never written.
Tests that run segtk in a subprocess would not see the mutants, and tests that race a clock
(time limits, body deadlines) fail when mutants run slowly, so groups list fast in-process
tests only, so that every group fits this 2-core machine.

    python bench/mutation.py [--quick] [--rev REV] [--jobs N] [GROUP ...]
    python bench/mutation.py --module editkit/_selection.py [--tests tests/test_samples.py ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HTTP = "plugins/models/http/segtk_http"
EQUIVALENT = REPO / "bench" / "mutation-equivalent.txt"
# A test failed (or, for a timeout, ran 10x past the tests' time: e.g. hypothesis shrinking a
# failure, or an endless loop). Timeouts are also counted apart.
KILLED = {"killed", "caught by type check", "timeout", "segfault"}


@dataclass(frozen=True)
class Group:
    """Modules (`paths` inside the staged tree) that carry one guarantee together, optionally
    only some of their functions (mutmut's mangled names: x_func, xǁClassǁmethod), and the
    tests that guard them, less `deselect` (node ids): tests that start worker processes or Ray,
    which crash in mutmut's forked children (a segfault would count as a kill)."""

    paths: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    what: str = ""
    deselect: tuple[str, ...] = ()

    @property
    def modules(self) -> list[str]:
        return [path.removesuffix(".py").replace("/", ".") for path in self.paths]

    def patterns(self) -> list[str]:
        """mutmut name patterns selecting the mutants of this group."""
        return [f"{m}.{f}__mutmut_*" for m in self.modules for f in self.functions] or \
            [f"{m}.*" for m in self.modules]


ORACLE_TESTS = ("tests/test_oracle.py", "tests/test_oracle_face.py", "tests/test_query_counter.py", "tests/test_fast_paths.py",
                "tests/test_attack_containment.py", "tests/test_attack_blame.py")
WHITE_BOX_TESTS = tuple(f"tests/test_white_box.py::{t}" for t in (  # the fast ones
    "test_each_forward_and_backward_pass_is_one_query",
    "test_every_pass_stays_in_the_ball_and_the_box_on_the_demo_model",
    "test_every_gradient_pass_is_checked_against_the_ball", "test_logits_without_a_graph_are_the_models_fault",
    "test_ignored_pixels_add_nothing_to_the_loss", "test_a_white_box_result_is_scored_on_the_stored_8bit_image",
    "test_cli_refuses_a_white_box_attack_on_a_labels_only_model_before_writing",
    "test_a_decision_based_attack_cannot_ask_for_gradients",
    "test_a_white_box_attack_is_refused_on_a_model_without_gradients",
    "test_plugins_marks_the_white_box_attacks")) + ("tests/test_white_box_exact.py",)
GROUPS = {
    "oracle": Group(
        ("segtk/core/_attack.py", "segtk/core/_oracle.py", "segtk/core/_oracle_run.py",
         "segtk/core/_verified.py"),
        ORACLE_TESTS + (
            "tests/test_attack_job.py", "tests/test_suites.py", *WHITE_BOX_TESTS,
            "tests/test_oracle_iterate.py", "tests/test_attack_returns.py",
            "tests/test_bench_attacks.py::test_smaller_budgets_read_off_one_run_equal_separate_runs",
            "plugins/attacks/dla/tests", "plugins/attacks/colour-stripes/tests"),
        what="the oracle: ε-ball and [0,1], verified images, best-so-far, checkpoints, Attack.run"),
    "counter": Group(("segtk/core/_segmenter.py",),
                     ORACLE_TESTS + ("tests/test_attack_job.py", *WHITE_BOX_TESTS,
                                     "tests/test_device.py::test_to_device_moves_every_module_and_tensor_of_a_model"),
                     what="the query counter and the check of a model's answer"),
    "metrics": Group(("segtk/core/_metrics.py",),
                     ("tests/test_metrics.py", "tests/test_fast_paths.py", "tests/test_oracle.py"),
                     what="confusion, IoU, mIoU, pixel accuracy, mR, dataset accumulation"),
    "quantise": Group(
        ("segtk/jobs/attack.py",),
        ("tests/test_attack_job.py", "tests/test_attack_job_records.py", "tests/test_fast_paths.py",
         "tests/test_attack_containment.py", "tests/test_attack_records.py",
         "tests/test_bench_attacks.py::test_the_table_scores_the_stored_8bit_images_not_the_float_candidates"),
        functions=("x_image_seed", "x_quantise", "x_evaluate", "xǁSummaryǁtable", "x_summarise",
                   "x_attack_dataset", "x__attack_batch", "x__num"),
        what="quantising to 8 bits, scoring the stored image, per-image records, the summary"),
    "runs": Group(("segtk/storage/runs.py",),
                  ("tests/test_runs.py", "tests/test_runs_exact.py", "tests/test_runs_inprocess.py",
                   "tests/test_attack_job.py",
                   *(f"tests/test_runs_faults.py::{t}" for t in (  # the in-process ones
                       "test_out_under_a_regular_file", "test_unwritable_out",
                       "test_disk_full_while_appending_exits_1_and_counts_only_what_is_written",
                       "test_any_other_os_error_is_one_line",
                       "test_one_process_may_reopen_its_run_and_then_frees_the_lock",
                       "test_run_json_records_limit_commit_and_weights"))),
                  what="run folders: whole-line appends, strict resume, the lock, run.json"),
    "bench": Group(
        ("segtk/benchmarks/attacks.py",),
        ("tests/test_bench_aggregate.py",
         "tests/test_bench_attacks.py::test_the_table_is_the_mean_and_population_std_of_the_repeats_dataset_miou",
         "tests/test_bench_attacks.py::test_the_table_scores_the_stored_8bit_images_not_the_float_candidates",
         "tests/test_runs_faults.py::test_bench_tables_are_strict_json",
         "tests/test_bench_attack_records.py"),
        functions=("x_bench_records", "x_run_bench", "x__records", "x_curve_label", "x_aggregate",
                   "x__row", "x__visibility", "x__mean_curve"),
        what="the bench table: complete repeats, mean ± population std, visibility, curves, resume"),
    "limits": Group(
        ("segtk_http/limits.py",),
        tuple(f"plugins/models/http/tests/test_limits.py::{t}" for t in (
            "test_npz_bomb_is_refused_from_its_header", "test_npz_limits_batch_and_request_total",
            "test_npz_decoding_matches_the_old_conversion", "test_bad_npz_images_are_protocol_errors",
            "test_bad_npz_bodies_are_protocol_errors", "test_png_limits_before_decoding",
            "test_png_decoding_matches_the_old_conversion", "test_limits_are_validated",
            "test_zip_directories_are_bounded_before_parsing"))  # in-process: no server, no clock
        + ("plugins/models/http/tests/test_limits_exact.py",),
        what="the server's limits: sizes from headers, batch and request totals"),
    "samples": Group(("segtk/editkit/_selection.py",),
                     ("tests/test_samples.py", "tests/test_object_selection.py"),
                     what="object selection for edits: masks, thin-mask threshold, tie-breaks"),
    "editkit": Group(("segtk/editkit/_editors.py", "segtk/editkit/_transforms.py",
                      "segtk/editkit/_inpaint.py", "segtk/editkit/_backends.py"),
                     ("tests/test_edit_editors.py", "tests/test_editkit_exact.py", "tests/test_suites.py",
                      "tests/test_samples.py",
                      "plugins/editors/size/tests", "plugins/editors/position/tests",
                      "plugins/editors/color/tests", "plugins/editors/material/tests"),
                     what="the editing kit: object transforms, labels moved with the object"),
    "bench-edits": Group(("segtk/benchmarks/edits.py",),
                         ("tests/test_bench_edits.py", "tests/test_table_vi.py",
                          "tests/test_run_records.py", "tests/test_mr_table.py",
                          "tests/test_scores_from_artefacts.py"),
                         what="bench edits: subsets, groups and their mR",
                         deselect=("tests/test_bench_edits.py::test_every_executor_writes_the_inline_"
                                   "run_byte_for_byte",)),
    "augment": Group(("segtk/benchmarks/augment.py", "segtk/benchmarks/seeds.py"),
                     ("tests/test_train.py", "tests/test_eval_seed.py", "tests/test_table_vi.py",
                      "tests/test_bench_seeds.py", "tests/test_bench_augment_exact.py"),
                     what="bench augment and seed repeats: rows, resume, mean over seeds"),
    "bench-shards": Group(
        ("segtk/benchmarks/attacks.py",),
        ("tests/test_bench_attacks.py", "tests/test_bench_attack_records.py",
         "tests/test_bench_attack_specs.py", "tests/test_bench_aggregate.py",
         "tests/test_white_box.py::test_white_box_gaps_measure_against_the_best_white_box_at_"
         "the_same_budget_and_eps"),
        what="bench attacks as a whole: sharding, per-image seeds, resume",
        deselect=("tests/test_bench_attacks.py::test_ray_executor_equals_local",
                  "tests/test_bench_attacks.py::test_local_process_pool_equals_inline_and_"
                  "writes_outputs")),
    "jobs": Group(("segtk/jobs/edit.py", "segtk/jobs/edit_records.py", "segtk/jobs/predict.py",
                   "segtk/jobs/train.py", "segtk/jobs/train_samples.py",
                   "segtk/jobs/checkpoints.py"),
                  ("tests/test_edit_job.py", "tests/test_train.py", "tests/test_run_records.py",
                   "tests/test_train_pipeline.py", "tests/test_query_counter.py",
                   "tests/test_consistency_loss.py", "tests/test_norm_eval.py",
                   "tests/test_job_messages.py"),
                  what="the edit, predict and train jobs: records, resume, checkpoints"),
}
QUICK = {  # the oracle's bounds and the query counter: a few minutes
    "oracle": Group(GROUPS["oracle"].paths, ORACLE_TESTS,
                    functions=("x_project", "x_box", "xǁOracleǁquery", "xǁOracleǁquery_each",
                               "xǁOracleǁ_check_bounds", "xǁVerifiedImagesǁproject",
                               "xǁVerifiedImagesǁ_check", "xǁVerifiedImagesǁanswer",
                               "xǁVerifiedImagesǁpatch", "xǁVerifiedImagesǁflip",
                               "xǁVerifiedImagesǁ_corner"),
                    what="the oracle's bounds (quick)"),
    "counter": Group(GROUPS["counter"].paths, ORACLE_TESTS,
                     functions=("xǁQueryCounterǁ__init__", "xǁQueryCounterǁremaining",
                                "xǁQueryCounterǁpredict"),
                     what="the query counter (quick)"),
}


def module_name(paths: list[str]) -> str:
    """An ad-hoc group's name: its modules' file names (`_selection`, `edits+augment`)."""
    return "+".join(Path(p).stem for p in paths)


def module_group(paths: list[str], tests: list[str]) -> Group:
    """A group for any module of the checkout, run with `tests` or else with every test file that
    names the module (its dotted path, or its file name for a plugin module)."""
    staged = []
    for path in paths:
        path = path.removeprefix("./")
        if not path.endswith(".py") or not (REPO / path).is_file():
            raise ValueError(f"--module {path}: no such Python file in the checkout")
        if path.startswith("plugins/") and not path.startswith(HTTP + "/"):
            raise ValueError(f"--module {path}: only segtk's own modules and {HTTP} are staged")
        staged.append(_staged_name(path))
    if not tests:
        names = [p.removesuffix(".py").replace("/", ".") for p in staged]
        names += [Path(p).stem for p in staged if p.startswith("segtk_http/")]
        files = _tracked(None, ["tests"]) + [f for f in _tracked(None, ["plugins"]) if "/tests/" in f]
        tests = sorted(f for f in files if f.endswith(".py") and Path(f).name.startswith("test_")
                       and any(re.search(rf"\b{re.escape(n)}\b", (REPO / f).read_text(errors="replace"))
                               for n in names))
        if not tests:
            raise ValueError(f"no test file names {', '.join(names)}: give --tests")
    return Group(tuple(staged), tuple(tests), what=f"{', '.join(paths)} (ad hoc)")


def package_paths() -> list[str]:
    """segtk's modules at the root (the wheel carries every one) and its subpackages' folders,
    as pyproject.toml's `packages` lists them (package-dir "." -> segtk: segtk.X is the folder
    X), so that a module or package added or moved is staged too."""
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = [p.removeprefix("segtk.").replace(".", "/") for p in listed if p != "segtk"]
    modules = sorted(p.name for pattern in ("*.py", "*.pyi", "py.typed") for p in REPO.glob(pattern))
    return [*modules, *folders]


def stage(root: Path, group: Group, rev: str | None) -> None:
    """The staged tree: segtk/ (and segtk_http/), the group's tests, a pyproject for mutmut."""
    test_dirs = sorted({_test_dir(t) for t in group.tests if not t.startswith("tests/")})
    # a plugin's tests may read its README (the suites check that it documents every value)
    readmes = [str(Path(d).parent / "README.md") for d in test_dirs if d.startswith("plugins/")]
    files = _tracked(rev, package_paths() + [HTTP, "tests", *test_dirs, *readmes])
    for name in files:
        target = root / _staged_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if rev is None:
            if (REPO / name).is_file():
                shutil.copy2(REPO / name, target)
        else:
            target.write_bytes(subprocess.run(["git", "show", f"{rev}:{name}"], cwd=REPO, check=True,
                                              capture_output=True).stdout)
    sources = sorted({path.split("/")[0] for path in group.paths})
    (root / "pyproject.toml").write_text(f"""[tool.mutmut]
source_paths = {json.dumps(sources)}
only_mutate = {json.dumps(list(group.paths))}
also_copy = {json.dumps(test_dirs + [r for r in readmes if (root / r).is_file()])}
pytest_add_cli_args = {json.dumps(["-p", "no:cacheprovider", "--import-mode=importlib",
                                  *(arg for test in group.deselect for arg in ("--deselect", test))])}
pytest_add_cli_args_test_selection = {json.dumps(list(group.tests))}
use_git_change_detection = false
timeout_multiplier = 10.0

[tool.pytest.ini_options]
filterwarnings = ["ignore:`torch.jit:DeprecationWarning"]
""")


def _tracked(rev: str | None, paths: list[str]) -> list[str]:
    """Tracked files under `paths` (at `rev`, or in the work tree: tracked plus new ones)."""
    if rev is not None:
        cmd = ["git", "ls-tree", "-r", "--name-only", rev, "--", *paths]
    else:
        cmd = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *paths]
    out = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "__pycache__" not in line]


def _test_dir(test: str) -> str:
    path = test.split("::")[0]
    return path if path.endswith("/tests") else str(Path(path).parent)


def _staged_name(name: str) -> str:
    if name.startswith(HTTP + "/"):
        return "segtk_http/" + name[len(HTTP) + 1:]
    if name.startswith(("tests/", "plugins/")):
        return name
    return "segtk/" + name


def run_group(name: str, group: Group, root: Path, jobs: int) -> dict:
    """Run mutmut on one group; its counts and each surviving mutant's diff."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    stage(root, group, ARGS.rev)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    log = root / "mutmut.log"
    with open(log, "w") as fh:
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs),
                              *group.patterns()], cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    if run.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed on group {name} (exit {run.returncode}); see {log}:\n{tail}")
    (root / "seconds").write_text(f"{seconds:.0f}\n")
    return collect(name, group, root)


def collect(name: str, group: Group, root: Path) -> dict:
    """The counts of a group mutmut has run in `root`, equivalents read afresh."""
    seconds = float((root / "seconds").read_text()) if (root / "seconds").exists() else 0.0
    statuses = _statuses(root, group)
    equivalent = load_equivalent()
    survivors: list[dict[str, str]] = []
    equivalents: list[dict[str, str]] = []
    left = sorted((m for m, status in statuses.items() if status not in KILLED), key=_natural)
    diffs = _diffs(root, group, left)
    for mutant in left:
        reason = equivalent.get((_function(mutant), _changed_lines(diffs[mutant])))
        (equivalents if reason else survivors).append(
            {"mutant": mutant, "status": statuses[mutant], "diff": diffs[mutant],
             **({"why": reason} if reason else {})})
    killed = sum(status in KILLED for status in statuses.values())
    timeouts = sum(status == "timeout" for status in statuses.values())
    return {"group": name, "modules": group.modules, "what": group.what, "mutants": len(statuses),
            "killed": killed, "timeouts": timeouts, "equivalent": len(equivalents), "survived": len(survivors),
            "seconds": round(seconds), "survivors": survivors, "equivalents": equivalents}


def _statuses(root: Path, group: Group) -> dict[str, str]:
    """Each selected mutant's status, as `mutmut results --all true` prints it."""
    from fnmatch import fnmatch

    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=root,
                         check=True, capture_output=True, text=True).stdout
    pairs = (line.strip().rsplit(": ", 1) for line in out.splitlines() if ": " in line)
    return {k: v for k, v in pairs if any(fnmatch(k, p) for p in group.patterns())}


DIFFS = """
import json, sys
from pathlib import Path
from mutmut.__main__ import get_diff_for_mutant
for name in json.loads(sys.stdin.read()):
    print(json.dumps([name, get_diff_for_mutant(name, path=Path(sys.argv[1]))]))
"""


def _diffs(root: Path, group: Group, mutants: list[str]) -> dict[str, str]:
    """The changed lines of each mutant (`mutmut show`'s diff, one process per module)."""
    diffs: dict[str, str] = {}
    for path, module in zip(group.paths, group.modules):
        mine = [m for m in mutants if m.startswith(module + ".")]
        out = subprocess.run([sys.executable, "-c", DIFFS, path], cwd=root, check=True,
                             input=json.dumps(mine), capture_output=True, text=True).stdout
        diffs.update(json.loads(line) for line in out.splitlines() if line.startswith("["))
    return {m: "\n".join(line for line in diffs[m].splitlines()
                         if line[:1] in "+-" and not line.startswith(("+++", "---")))
            for m in mutants}


def _function(mutant: str) -> str:
    return mutant.rsplit("__mutmut_", 1)[0]


def _changed_lines(diff: str) -> tuple[str, ...]:
    return tuple(line[0] + " " + line[1:].strip() for line in diff.splitlines())


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def load_equivalent() -> dict[tuple[str, tuple[str, ...]], str]:
    """bench/mutation-equivalent.txt: blocks of a function name, its changed lines (- and +, as
    `mutmut show` prints them) and `why: ...`, separated by blank lines; matched by content, so
    an entry survives renumbering of the mutants."""
    entries: dict[tuple[str, tuple[str, ...]], str] = {}
    if not EQUIVALENT.exists():
        return entries
    for block in EQUIVALENT.read_text().split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith("#")]
        if not lines:
            continue
        why = [line for line in lines if line.startswith("why:")]
        changed = tuple(line[0] + " " + line[1:].strip() for line in lines[1:] if line[:1] in "+-")
        if not why or not changed:
            raise SystemExit(f"{EQUIVALENT}: an entry needs a function, changed lines and why:\n{block}")
        entries[(lines[0].strip(), changed)] = why[0][4:].strip()
    return entries


def report(results: list[dict]) -> str:
    lines = ["| group | module | mutants | killed (timeouts) | survived | equivalent | "
             "killed % of non-equivalent | time |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        score = 100 * r["killed"] / max(r["mutants"] - r["equivalent"], 1)
        modules = ", ".join(f"`{m}`" for m in r["modules"])
        lines.append(f"| {r['group']} | {modules} | {r['mutants']} | {r['killed']} "
                     f"({r['timeouts']}) | {r['survived']} | {r['equivalent']} | {score:.1f} | "
                     f"{r['seconds']} s |")
    total = {k: sum(r[k] for r in results)
             for k in ("mutants", "killed", "timeouts", "survived", "equivalent")}
    score = 100 * total["killed"] / max(total["mutants"] - total["equivalent"], 1)
    lines.append(f"| all | | {total['mutants']} | {total['killed']} ({total['timeouts']}) | "
                 f"{total['survived']} | {total['equivalent']} | {score:.1f} | "
                 f"{sum(r['seconds'] for r in results)} s |")
    for r in results:
        for s in r["survivors"]:
            lines += ["", f"SURVIVED {s['mutant']} ({s['status']})", s["diff"]]
    return "\n".join(lines)


def main() -> int:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help=f"some of {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="the oracle's bounds and the counter")
    parser.add_argument("--rev", help="stage this commit instead of the work tree")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATION_JOBS", "2")))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("MUTATION_DIR", Path(tempfile.gettempdir()) / "segtk-mutation")))
    parser.add_argument("--report", action="store_true",
                        help="recount the groups already run in --out (after editing the "
                             "equivalents), without running mutmut again")
    parser.add_argument("--module", action="append", default=[], metavar="PATH",
                        help="mutate this module (e.g. editkit/_selection.py; repeatable) as one group "
                             "named after it, with --tests or the test files that name it")
    parser.add_argument("--tests", nargs="+", default=[], metavar="TEST",
                        help="with --module: the tests to run (files, folders or node ids)")
    ARGS = parser.parse_args()
    groups = QUICK if ARGS.quick else GROUPS
    if ARGS.module:
        if ARGS.groups or ARGS.quick:
            parser.error("--module makes its own group: give no GROUP and no --quick")
        try:
            groups = {module_name(ARGS.module): module_group(ARGS.module, ARGS.tests)}
        except ValueError as exc:
            parser.error(str(exc))
    elif ARGS.tests:
        parser.error("--tests goes with --module")
    unknown = [g for g in ARGS.groups if g not in groups]
    if unknown:
        parser.error(f"unknown group {unknown[0]!r}: choose from {', '.join(groups)}")
    results = []
    for name in ARGS.groups or list(groups):
        print(f"== {name}: {groups[name].what}", flush=True)
        root = ARGS.out / name
        if ARGS.report:
            if not (root / "mutants").is_dir():
                continue
            results.append(collect(name, groups[name], root))
        else:
            results.append(run_group(name, groups[name], root, ARGS.jobs))
        r = results[-1]
        print(f"   {r['mutants']} mutants, {r['killed']} killed, {r['survived']} survived, "
              f"{r['equivalent']} equivalent ({r['seconds']} s)", flush=True)
    ARGS.out.mkdir(parents=True, exist_ok=True)
    (ARGS.out / "summary.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    text = report(results)
    (ARGS.out / "summary.md").write_text(text + "\n")
    print(text)
    print(f"\nsummary: {ARGS.out / 'summary.md'} and summary.json")
    return 1 if any(r["survived"] for r in results) else 0


ARGS: argparse.Namespace

if __name__ == "__main__":
    sys.exit(main())
