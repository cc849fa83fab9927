"""segtk's Python API: the functions behind the CLI commands, so both give the same numbers.

    import segtk
    result = segtk.attack("demo", "demo", attack="dla", budget=50, limit=4)
    print(result.adv_miou, result.records[0]["queries"])

Models are specs (as `--model` takes them), loaded objects (`load_model`) or your own
`torch.nn.Module` (`wrap`); data are specs, loaded datasets (`load_dataset`), tensors, (image,
label) pairs or a DataLoader; `attack_tensors` attacks tensors and returns tensors; attacks and benchmarks write nothing unless given `out`,
a run folder written exactly as the CLI writes it (and resumable by either).
"""

from segtk.api.attacks import attack, bench_attacks
from segtk.api.edits import bench_edits, edit
from segtk.api.loading import load_dataset, load_model
from segtk.api.models import wrap
from segtk.api.predicting import predict, report
from segtk.api.results import AttackRun, Table
from segtk.api.seeds import bench_seeds
from segtk.api.tensors import attack_tensors
from segtk.api.training import bench_augment, train

__all__ = ["AttackRun", "Table", "attack", "attack_tensors", "bench_attacks", "bench_augment",
           "bench_edits", "bench_seeds", "edit", "load_dataset", "load_model", "predict", "report",
           "train", "wrap"]
