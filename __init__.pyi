# Types of segtk's lazily imported API (see __init__.py: `segtk.attack` imports segtk.api
# on first use); type checkers read this stub instead of the module's __getattr__.
from segtk.api import AttackRun as AttackRun
from segtk.api import Table as Table
from segtk.api import attack as attack
from segtk.api import attack_tensors as attack_tensors
from segtk.api import bench_attacks as bench_attacks
from segtk.api import bench_augment as bench_augment
from segtk.api import bench_edits as bench_edits
from segtk.api import bench_seeds as bench_seeds
from segtk.api import edit as edit
from segtk.api import load_dataset as load_dataset
from segtk.api import load_model as load_model
from segtk.api import predict as predict
from segtk.api import report as report
from segtk.api import train as train
from segtk.api import wrap as wrap
from segtk.evaluation import evaluate as evaluate

__version__: str
__all__: list[str]
