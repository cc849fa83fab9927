"""The names of the files and folders in a run folder, defined once.

Jobs write these, reports and dataset readers find them; renaming one is a change here only.
Which run kinds hold which is in docs/attacks.md (attack, bench attacks), docs/editing.md
(edit, bench edits) and docs/training.md (train, bench augment).
"""

from __future__ import annotations

# every run
RUN = "run.json"  # command, versions, kind, config and summary
RESULTS = "results.jsonl"  # one record per line, appended whole (an edit run's is MANIFEST)
LOCK = ".lock"  # held by the process writing the run
REPORT = "report.html"  # `segtk report`
REPORT_FILES = "report_files"  # the pictures report.html links to, rebuilt with it

# pictures and labels, one PNG per image
IMAGES = "images"
LABELS = "labels"
OVERLAYS = "overlays"
SOURCE = "source"  # an edit run: the prepared source images and labels the edits start from
SHEET_DIR = "sheet"  # a bench-attacks run: the stored images its contact sheet shows
CONTACT_SHEET = "contact_sheet.png"

# an edit run (a dataset segtk reads back: `--data edited:OUT`)
MANIFEST = "manifest.jsonl"
SKIPPED = "skipped.jsonl"
CLASSES = "classes.txt"
MASKS = "masks"  # the edited object (255) of each edit, one PNG per image
FILTERS = "filters"  # what the noise filters cache (e.g. the surrogate's per-class losses)

# a benchmark's sub-runs
EDITS = "edits"  # bench edits and bench augment: an edit run per subset, OUT/edits/SUBSET
TRAIN = "train"  # bench augment: a train run per augmentation, OUT/train/LABEL

# benchmark tables and charts
TABLE_CSV = "table.csv"
TABLE_JSON = "table.json"
CURVES_JSON = "curves.json"
CURVES_PNG = "curves.png"
MIOU_CHART = "miou.png"
QUALITY_CSV = "quality.csv"
TABLE_VI = "table_vi.csv"
SUMMARY = "summary.json"  # `segtk predict --out`

# a train run
CHECKPOINTS = "checkpoints"
CHECKPOINT_DONE = "checkpoint.json"  # written last: a checkpoint folder without it is partial
CHECKPOINT_MODEL = "model"  # in a checkpoint: the model as its plugin saves it
STATE = "state.safetensors"
OPTIMIZER = "optimizer.pt"
MODEL_SPEC = "model.spec"
VAL_SCORES = "val_scores.json"
