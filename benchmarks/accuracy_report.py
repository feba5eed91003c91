"""Write ``docs/accuracy.md``: the accuracy benchmarks at a quick size, dated, as tables.

Run: ``python benchmarks/accuracy_report.py [--output docs/accuracy.md] [--only NAME,...]``

Each section runs one benchmark of this folder as its own process at the size given in
``SECTIONS`` (a few CPU minutes in all on 2 cores), and its printed tables go into the file
under the command that made them, with its wall and CPU seconds. Public data is read from
``$ROOFCAST_SHARED_DATA``, else ``../shared/data`` beside the checkout; a section whose data is
missing or whose command fails says so in the file (the report is still written). The file's
``## History`` section (dated figures of earlier, larger runs) is kept as it is: append to it by
hand when a full run moves a figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "accuracy.md"
HISTORY = "## History"


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    what: str
    args: tuple[str, ...]


SECTIONS: tuple[Section, ...] = (
    Section("kernels", "Analytical estimators on public GPU kernels",
            "NeuSight and DeepBench kernel timings (a random sample of 2,000 rows, seed 0) "
            "against each analytical estimator: error per op family, and of predicted speedups "
            "between devices that measured the same kernel.",
            ("analytical_accuracy.py", "--sample", "2000", "--summary-only")),
    Section("learned", "Learned estimators, grouped cross-validation",
            "The learned predictors trained as `roofcast train` does (quick: 300 public rows per "
            "family and device, small ensembles) and validated leave-one-model-out on the "
            "bundled CPU runs and leave-one-device-out on the public GPU kernels, beside the "
            "analytical baseline.",
            ("learned_accuracy.py", "--quick")),
    Section("serving", "LLM serving against LLM-Inference-Bench",
            "Argonne's single-device serving runs: batch latency per engine, leave one device "
            "out of the engine calibration and in distribution; TTFT; quantised weights and KV "
            "cache; tokens per joule (Vidur's per-op timings are left out at this size).",
            ("llm_accuracy.py", "--quick", "--skip-vidur")),
    Section("collectives", "Collectives and multi-device serving",
            "NCCL collectives of a system left out of the fit, against the measured curves "
            "(1 MiB to 1 GiB); then the tensor/pipeline-parallel serving rows of Argonne Fig 5a.",
            ("multidevice_accuracy.py",)),
)


def shared_data_env() -> dict[str, str]:
    """The environment of a section: ``ROOFCAST_SHARED_DATA`` set when the data is found."""
    env = dict(os.environ)
    if "ROOFCAST_SHARED_DATA" not in env and (ROOT.parent / "shared" / "data").is_dir():
        env["ROOFCAST_SHARED_DATA"] = str(ROOT.parent / "shared" / "data")
    return env


def run_section(section: Section) -> tuple[str, str]:
    """(the section's printed output, its timing line): the benchmark run as its own process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / section.args[0]),
                           *section.args[1:]], cwd=ROOT, env=shared_data_env(),
                          capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    timing = f"{time.perf_counter() - start:.0f} s wall, {cpu_s:.0f} s CPU"
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        return f"FAILED (exit {done.returncode}):\n{tail}", timing
    return done.stdout.rstrip(), timing


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def kept_history(path: Path) -> str:
    """The ``## History`` section of the existing report, unchanged (empty when none)."""
    if not path.is_file():
        return ""
    text = path.read_text()
    return text[text.index(HISTORY):].rstrip() + "\n" if HISTORY in text else ""


def render(results: list[tuple[Section, str, str]], history: str, when: datetime) -> str:
    out = [
        "# roofcast accuracy",
        "",
        f"Generated {when:%Y-%m-%d %H:%M} UTC by `python benchmarks/accuracy_report.py` "
        f"(commit {git_commit()}, {cpu_name()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}). Every table below is printed by the command above",
        "it, at a quick size so the whole report runs in minutes on a laptop; the full-size runs",
        "and how each figure moved over time are in the [history](#history). Errors are",
        "|predicted - measured| / measured (APE) unless a table says otherwise. Rerun on your",
        "machine (CPU figures on an idle one): that is the number to trust.",
        "",
    ]
    for section, text, timing in results:
        command = " ".join(("python", f"benchmarks/{section.args[0]}", *section.args[1:]))
        out += [f"## {section.title}", "", section.what, "",
                f"`{command}` ({timing}):", "", "```text", text, "```", ""]
    out.append(history.rstrip() if history else f"{HISTORY}\n\n(none yet)")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--only", default=None,
                        help=f"comma-separated subset of {', '.join(s.name for s in SECTIONS)}")
    args = parser.parse_args(argv)
    chosen = set(args.only.split(",")) if args.only else {s.name for s in SECTIONS}
    unknown = chosen - {s.name for s in SECTIONS}
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}")
    results = []
    for section in SECTIONS:
        if section.name in chosen:
            print(f"{section.name}: {' '.join(section.args)}", flush=True)
            results.append((section, *run_section(section)))
            print(f"  {results[-1][2]}", flush=True)
    history = kept_history(args.output)
    args.output.write_text(render(results, history, datetime.now(UTC)))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
