"""How much does starting `segtk` cost, next to importing torch?

Prints the CPU time (user + system, of the child process) of `segtk --help` over that of
`python -c "import torch"`, each the best of `--repeats` runs in a fresh interpreter, and the
modules `segtk --help` imports. `segtk --help` imports neither torch nor any plugin, so the
ratio is the price of Python, click and the command table alone.

    python bench/startup_ratio.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

HELP = "import sys; from segtk.cli import main; sys.argv = ['segtk', '--help']; main()"
TORCH = "import torch"
COUNT = ("import sys; from segtk.cli import main; sys.argv = ['segtk', '--help']\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "print(len(sys.modules), 'torch' in sys.modules, "
         "sorted({m.split('.')[0] for m in sys.modules if m.startswith('segtk_')}), file=sys.stderr)")


def cpu_seconds(code: str) -> float:
    """CPU time of one fresh `python -c code` (its own and its children's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cpu_seconds(HELP)  # warm the file cache
    cpu_seconds(TORCH)
    helped = min(cpu_seconds(HELP) for _ in range(args.repeats))
    torch = min(cpu_seconds(TORCH) for _ in range(args.repeats))
    counted = subprocess.run([sys.executable, "-c", COUNT], check=True, capture_output=True,
                             text=True).stderr.strip()
    modules, has_torch, plugins = counted.split(" ", 2)
    print(f"segtk --help: {helped:.3f} s CPU, {modules} modules, torch {has_torch}, "
          f"plugin modules {plugins}")
    print(f"python -c 'import torch': {torch:.3f} s CPU")
    print(f"ratio (segtk --help / import torch, best of {args.repeats}): {helped / torch:.2f}")


if __name__ == "__main__":
    main()
