"""Derive per-device efficiency curves from the NeuSight *train* split (provenance script).

Run: ``.venv/bin/python benchmarks/fit_efficiency_curves.py [--write]`` — prints TOML
``[[curve]]`` blocks; ``--write`` replaces the section between the ``# >>> fitted`` and
``# <<< fitted`` markers of ``predictor/data/efficiency/efficiency_curves.toml`` with them (the
literature priors outside the markers are kept). Only NeuSight rows with ``split == "train"``
are used: the test split and every DeepBench row stay out of sample. Each train kernel is run
through ``traffic`` with unit efficiencies and the isolated-kernel harness; the needed
efficiencies are fitted by ``predictor.efficiency_fit`` (method and history:
``docs/design/fitted.md``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.analytical_accuracy import apply_harness, featurize_all, host_floor_s
from roofcast.predictor.efficiency import DEFAULT_CURVES_PATH as CURVES_FILE
from roofcast.predictor.efficiency import Curve
from roofcast.predictor.efficiency_fit import fit_curves
from roofcast.predictor.estimator_registry import make_estimator
from roofcast.training_data.public_kernels import kernel_workload, load_kernels

BEGIN, END = "# >>> fitted", "# <<< fitted"
UNIT_CURVES = "\n".join(
    f'[[curve]]\nkind = "*"\nengine = "{e}"\ndtype = "*"\nx = "{x}"\npoints = [[0.0, 1.0]]\n'
    f'basis = "unit efficiency for fitting"\n'
    for e, x in (("matrix", "log10_flops"), ("vector", "log10_flops"), ("memory", "log10_bytes")))


def needed_efficiencies(tmp: Path) -> pd.DataFrame:
    table = load_kernels()
    k = table.kernels
    floors = host_floor_s(k)
    k = k[k["split"].eq("train")]
    X = apply_harness(featurize_all(k, kernel_workload(k)), k, floors)
    curves = tmp / "unit_curves.toml"
    curves.write_text(UNIT_CURVES)
    e = make_estimator("traffic", curves_path=str(curves), overhead="additive",
                       warm_l2="all").explain(X)
    t_kernel = k["latency_s"] - X["launch_overhead_s"]
    moved = X["bytes_read"] + X["bytes_written"]
    return pd.DataFrame({
        "device": k["device"], "family": k["family"], "flops": X["flops"], "bytes": moved,
        "compute_s": e["compute_s"], "memory_s": e["memory_s"], "t_kernel": t_kernel,
        "l2_bytes": X["l2_bytes"],
    })


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        df = needed_efficiencies(Path(tmp))
    text = "\n".join(Curve(**c).to_toml() for c in fit_curves(df))
    if "--write" in sys.argv[1:]:
        doc = CURVES_FILE.read_text()
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        CURVES_FILE.write_text(f"{head}{BEGIN}\n\n{text}\n{END}{tail}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
