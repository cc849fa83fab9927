#!/usr/bin/env bash
# Mutation testing of the modules that carry segtk's guarantees, with mutmut (pinned with pytest
# in the `test` extra of pyproject.toml; `pip install -e .[test]`).
#
#   bench/mutation.sh                every group of bench/mutation.py's GROUPS, each with only
#                                    its fast in-process tests: several hours on this 2-core
#                                    machine (docs/reliability.md gives each group's time)
#   bench/mutation.sh --quick        the oracle's bounds and the query counter only: a few
#                                    minutes (what CI may run)
#   bench/mutation.sh oracle runs    some groups
#   bench/mutation.sh --rev HEAD     mutate a commit instead of the work tree
#   bench/mutation.sh --report       recount the last run (e.g. after listing an equivalent)
#   bench/mutation.sh --module editkit/_selection.py [--tests tests/test_samples.py]
#                                    any module of the checkout, with the given tests or every
#                                    test file that names it
#
# mutmut changes one small thing at a time (`<` for `<=`, a constant, a dropped argument) and
# runs the tests that cover the changed function; a mutant no test notices "survives". The
# driver (bench/mutation.py) stages the package as segtk/ in a scratch folder, since segtk's
# root is the package itself (package-dir "."), so the checkout is never written. It prints
# per group: mutants, killed, survived, equivalent (listed with the reason each cannot be
# killed in bench/mutation-equivalent.txt), and every survivor's diff; the tables go to
# $MUTATION_DIR/summary.md and summary.json (default segtk-mutation in the temp directory). It exits 1 if any
# mutant that is not listed as equivalent survives. MUTATION_JOBS sets the children (2).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
exec nice -n 10 python bench/mutation.py "$@"
