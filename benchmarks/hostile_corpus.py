"""Independent hostile corpus (issue 27's acceptance): >= 600 generated inputs over the newer
surfaces, each run as ``roofcast`` (or a Python API script) in a fresh sandbox, classified.

Usage::

    nice -n 10 .venv/bin/python benchmarks/hostile_corpus.py [--jobs 2] [--surface S] [--list]

Surfaces: sweep-spec, sweep-output, plan-flags, user-systems, runtime-profiles, models-data,
python-api, llm-config, cli-numbers (``cases()``). Each case runs in a child forked from a warm
interpreter (``tests/hostile/fork_server.py``) under ``RLIMIT_AS`` 4 GiB and 60 s, with HOME,
TMPDIR, XDG_* and every ``ROOFCAST_*_DIR`` inside its sandbox and the current folder ``work/``.
Clean: exit 0 or 2; no "Traceback" on stderr; exit 2 with one error line (from the first
``roofcast COMMAND: error:`` line to the end); no hang; the canary tree (``fence/``, the user's
files in ``work/mine/``, the sandbox's and the repository's top level) unchanged. Prints
surface x (inputs, clean, not clean) and every unclean case.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.helpers import fork_pool  # noqa: E402

MEM_GIB, TIMEOUT_S = 4.0, 60.0
FOLDERS = ("home", "work", "data", "systems", "runtimes", "hw", "tmp", "fence")
#: one file entry: (kind, path relative to the sandbox, payload); kind file | link | fifo | dir
Entry = tuple[str, str, bytes | str]
API_WRAPPER = """import sys
import roofcast
try:
    result = {call}
    if hasattr(result, "to_string"):
        result.to_string()
    else:
        repr(result)
except (ValueError, TypeError) as exc:
    print(f"roofcast API: error: {{type(exc).__name__}}: {{exc}}", file=sys.stderr)
    sys.exit(2)
"""


@dataclass(frozen=True)
class Case:
    """One input: ``argv`` of ``roofcast`` (``{work}``, ``{fence}`` ... stand for the sandbox's
    folders) or ``api`` (a Python expression run by ``API_WRAPPER``), the ``files`` it needs
    and extra environment variables."""

    surface: str
    name: str
    argv: tuple[str, ...] = ()
    files: tuple[Entry, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api: str | None = None


@dataclass
class Result:
    case: Case
    rc: int | None = None
    problems: list[str] = field(default_factory=list)
    last: str = ""
    seconds: float = 0.0


# ------------------------------------------------------------------------- shared inputs
BAD_NUMBERS = ("0", "-1", "-0", "1.5", "1e3", "nan", "inf", "", " ", "0x10", str(10**21),
               str(2**63), "9" * 400, "1_0", "\u0663", "+5", "\x1b[31m7", "2147483647")
SPEC = "[sweep]\nmodels=['resnet50']\ndevices=['t4']\n"
SPEC_KEY_VALUES = ("[]", "[0]", "[-1]", "[1.5]", "['x']", "[[1]]", "[{a=1}]", "1", "'x'",
                   "{a=1}", "[true]", "[1e400]", "[nan]", "[inf]", f"[{10**30}]",
                   "[" + ",".join("1" for _ in range(5000)) + "]")
SYSTEM = (REPO / "hw_catalog" / "systems" / "dgx-a100.toml").read_text()
RUNTIME = (REPO / "predictor" / "runtimes" / "profiles" / "vllm.toml").read_text()
HF = json.loads((REPO / "graph_import" / "llm" / "configs" / "aquila-7b.json").read_text())


def _toml_junk() -> dict[str, bytes | str]:
    """Malformed or hostile TOML bodies shared by the file surfaces."""
    return {
        "empty": b"", "binary": bytes(range(256)) * 8, "bom": "\ufeffid='x'\n".encode(),
        "utf16": "id = 'x'\n".encode("utf-16"), "not toml": b"{{{ ]]] ===",
        "dotted 60k": ("a" + ".a" * 30_000 + " = 1\n").encode(),
        "arrays 5000 deep": ("x = " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "tables 3000 deep": ("x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n").encode(),
        "300 KB": ("# " + "x" * 300_000 + "\n").encode(),
        "nul byte": b"id = 'a\x00b'\n", "escape id": b"id = \"x\\u001b[2J\"\n",
    }


def _special_files(rel: str) -> dict[str, tuple[Entry, ...]]:
    """The same file name as a link out (to a system file, to the fence), a FIFO, a folder."""
    return {"link to /etc/passwd": (("link", rel, "/etc/passwd"),),
            "link to the fence": (("link", rel, "{fence}/secret.toml"),),
            "dangling link": (("link", rel, "{fence}/nothing-here"),),
            "fifo": (("fifo", rel, ""),), "folder": (("dir", rel, ""),)}


# ------------------------------------------------------------------------- sweep specs
def _sweep_spec() -> Iterator[Case]:
    def run(name: str, text: bytes | str, extra: tuple[str, ...] = ()) -> Case:
        body = text.encode() if isinstance(text, str) else text
        return Case("sweep-spec", name, ("sweep", "{work}/s.toml", "--output", "{work}/out",
                                         *extra), (("file", "work/s.toml", body),))

    keys = ("models", "devices", "batches", "precisions", "modes", "runtimes", "plans",
            "input_tokens", "output_tokens", "dims", "estimator", "baseline", "name")
    for key in keys:
        for value in SPEC_KEY_VALUES:
            base = "\n".join(line for line in SPEC.splitlines() if not line.startswith(key))
            yield run(f"{key}={value[:30]}", f"{base}\n{key}={value}\n")
    paths = ("'/etc/passwd'", "'../fence/m.onnx'", "'{fence}/m.onnx'", "'llm:/etc'",
             "'llm:../fence'", "'M.ONNX'", "'../fence/C.JSON'", "'sub'", "'/dev/zero.onnx'",
             "'link.onnx'", "'fifo.onnx'", "'llm:link.json'", "'x' * 3", "'\\u202e.onnx'")
    for p in paths:
        yield Case("sweep-spec", f"model path {p}",
                   ("sweep", "{work}/s.toml", "--output", "{work}/out"),
                   (("file", "work/s.toml",
                     f"[sweep]\nmodels=[{p}]\ndevices=['t4']\n".encode()),
                    ("link", "work/link.onnx", "{fence}/m.onnx"),
                    ("link", "work/link.json", "{fence}/c.json"),
                    ("fifo", "work/fifo.onnx", ""), ("dir", "work/sub", "")))
    for name, body in _toml_junk().items():
        yield run(f"junk {name}", body)
    for name, files in _special_files("work/s.toml").items():
        yield Case("sweep-spec", f"spec is {name}",
                   ("sweep", "{work}/s.toml", "--output", "{work}/out"), files)
    grid = "[sweep]\nmodels=['resnet50']\ndevices=['t4','a100-80gb-sxm','h100-sxm']\n"
    for n in (9_999, 99_999, 999_999):
        yield run(f"grid {n} batches", grid + f"batches={list(range(1, n + 1))}\n")


# ------------------------------------------------------------------------- sweep outputs
def _sweep_output() -> Iterator[Case]:
    spec = (("file", "work/s.toml", SPEC.encode()),)
    marker = ("file", "work/d/_roofcast_sweep.json", b"{}")
    mine = ("file", "work/d/notes.txt", b"mine")
    targets: dict[str, tuple[Entry, ...]] = {
        "folder with a stray marker": (marker, mine),
        "marker and notebook": (marker, ("file", "work/d/x.ipynb", b"{}")),
        "marker only": (marker,),
        "marker is a folder": (("dir", "work/d/_roofcast_sweep.json", ""),),
        "marker links out": (("link", "work/d/_roofcast_sweep.json", "{fence}/secret.toml"),),
        "marker garbage": (("file", "work/d/_roofcast_sweep.json", bytes(range(256))),),
        "marker huge": (("file", "work/d/_roofcast_sweep.json", b"[" * 100_000),),
        "link to the fence": (("link", "work/d", "{fence}"),),
        "dangling link": (("link", "work/d", "{fence}/none"),),
        "a file": (("file", "work/d", b"mine"),),
        "a fifo": (("fifo", "work/d", ""),),
        "user files": (mine,),
        "empty folder": (("dir", "work/d", ""),),
        "parquet of the user": (("file", "work/d/resnet50.parquet", b"PAR1mine"),),
    }
    for name, files in targets.items():
        yield Case("sweep-output", name, ("sweep", "{work}/s.toml", "--output", "{work}/d"),
                   spec + files)
    for out in (".", "..", "/", "~", "{home}", "{fence}", "{work}/mine", "", " ", "-",
                "{work}/a/b/c", "\x1b[31mred", "{work}/" + "x" * 300, "/proc/self",
                "/dev/null", "{work}/d\n"):
        yield Case("sweep-output", f"--output {out[:40]!r}",
                   ("sweep", "{work}/s.toml", "--output", out), spec)
    for name in ("/abs/elsewhere/x", "../fence/pwned", "..", ".", "a/b", "x\u202egnp",
                 "\x1b[2J", "con", "x" * 300, "", " "):
        yield Case("sweep-output", f"spec name {name[:30]!r}", ("sweep", "{work}/s.toml"),
                   (("file", "work/s.toml", (SPEC + f"name={json.dumps(name)}\n").encode()),))


# ------------------------------------------------------------------------- plan / parallel
def _plan_flags() -> Iterator[Case]:
    systems = ("hgx-h100:nodes=0", "hgx-h100:nodes=-1", "hgx-h100:nodes=1e30",
               f"hgx-h100:nodes={10**12}", "hgx-h100:devices_per_node=0",
               "hgx-h100:nic_GBps=nan", "hgx-h100:nic_GBps=-5", "hgx-h100:link_GBps=inf",
               "hgx-h100:bogus=1", "hgx-h100:", ":nodes=4", "hgx-h100:nodes=4,nodes=5",
               "", " ", "\x1b[2J", "../x", "/etc/passwd", "x" * 10_000, "hgx-h100:nodes=4:x=3")
    commands = {"plan": ("plan", "llama-3.1-8b", "--global-batch", "64"),
                "llm": ("llm", "llama-3.1-8b"),
                "predict": ("predict", "gpt2", "--global-batch", "64"),
                "compare": ("compare", "gpt2", "--global-batch", "64")}
    for system in systems:
        for name, argv in commands.items():
            yield Case("plan-flags", f"{name} --system {system[:30]!r}",
                       (*argv, "--system", system))
    degrees = (("--tp", "3"), ("--tp", "16"), ("--pp", "1024"), ("--ep", "8"), ("--dp", "7"),
               ("--micro-batches", "0"), ("--micro-batches", str(10**9)), ("--zero", "4"),
               ("--zero", "1,2"), ("--tp", str(10**21)), ("--pp", "-2"), ("--ep", "0"))
    for flag, value in degrees:
        yield Case("plan-flags", f"predict {flag} {value}",
                   ("predict", "gpt2", "--system", "hgx-h100", "--global-batch", "64", flag,
                    value))
    for value in ("2147483648", "2147483647", str(10**18), "0", "-8", "64.5", "nan",
                  "1e6", str(2**24 + 1), "1000003"):
        yield Case("plan-flags", f"plan --global-batch {value}",
                   ("plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", value))
    for hw, devices in (("rtx-3090", "8000000000000"), ("h100-sxm", "0"),
                        ("h100-sxm", str(2**20 + 1)), ("xeon-8380", "8"), ("nope", "8"),
                        ("h100-sxm,a100-80gb-sxm", "8"), ("h100-sxm", "1")):
        yield Case("plan-flags", f"plan --hw {hw} --devices {devices}",
                   ("plan", "llama-3.1-8b", "--hw", hw, "--devices", devices,
                    "--global-batch", "64"))
    for extra in (("--seq", "0"), ("--seq", str(10**12)), ("--recompute",),
                  ("--sequence-parallel",), ("--mode", "nope"), ("--tp-comm-overlap", "x")):
        yield Case("plan-flags", f"predict one device {' '.join(extra)}",
                   ("predict", "resnet50", "--hw", "h100-sxm", *extra))


# ------------------------------------------------------------------------- user systems
def _system_bodies() -> dict[str, bytes | str]:
    swap = {"nodes = 1": ["nodes = 0", "nodes = -1", "nodes = 1e9", f"nodes = {2**62}",
                          "nodes = 'two'", "nodes = nan", "nodes = [1]"],
            "devices_per_node = 8": ["devices_per_node = 0", f"devices_per_node = {2**40}",
                                     "devices_per_node = 1.5"],
            'device = "a100-80gb-sxm"': ['device = "nope"', "device = 1", 'device = ""',
                                         'device = "../../etc/passwd"'],
            "link_GBps = 300": ["link_GBps = 0", "link_GBps = -1", "link_GBps = inf",
                                "link_GBps = nan", "link_GBps = 1e308"],
            'kind = "nvswitch"': ['kind = "warp-drive"', "kind = 5"],
            "count_per_node = 8": ["count_per_node = -8", f"count_per_node = {10**30}"]}
    own = SYSTEM.replace('id = "dgx-a100"', 'id = "mine"').replace(
        'aliases = ["hgx-a100", "dgx-a100-640gb", "nd-a100-v4"]', "aliases = []")
    bodies: dict[str, bytes | str] = {"valid own": own, "builtin id again": SYSTEM}
    for old, news in swap.items():
        for new in news:
            bodies[new] = own.replace(old, new, 1)
    bodies.update({"no fabric": own.split("[fabric]")[0], "alias list 100k":
                   own.replace("aliases = []", f"aliases = {['a'] * 100_000}"),
                   "id with slash": own.replace('id = "mine"', 'id = "../mine"'),
                   **_toml_junk()})
    return bodies


def _user_file_cases(surface: str, rel: str, bodies: dict[str, bytes | str],
                     commands: tuple[tuple[str, ...], ...]) -> Iterator[Case]:
    """Each body written to ``rel`` under every command, then ``rel`` as each special file
    under the first command."""
    for name, body in bodies.items():
        data = body.encode() if isinstance(body, str) else body
        for argv in commands:
            yield Case(surface, f"{name} | {' '.join(argv[:2])}", argv, (("file", rel, data),))
    for name, files in _special_files(rel).items():
        yield Case(surface, f"file is {name}", commands[0], files)


def _user_systems() -> Iterator[Case]:
    commands = (("systems", "list"), ("systems", "show", "mine"),
                ("plan", "llama-3.1-8b", "--system", "mine", "--global-batch", "64"))
    yield from _user_file_cases("user-systems", "systems/mine.toml", _system_bodies(), commands)
    yield Case("user-systems", "folder is a file", ("systems", "list"),
               env=(("ROOFCAST_SYSTEMS_DIR", "{fence}/secret.toml"),))
    yield Case("user-systems", "folder links to /etc", ("systems", "list"),
               env=(("ROOFCAST_SYSTEMS_DIR", "/etc"),))
    yield Case("user-systems", "5000 files", ("systems", "list"),
               tuple(("file", f"systems/s{i}.toml", b"x") for i in range(5000)))


# ------------------------------------------------------------------------- runtime profiles
def _runtime_bodies() -> dict[str, bytes | str]:
    own = RUNTIME.replace('name = "vllm"', 'name = "mine"')
    swap = {"memory_utilization = 0.9": ["memory_utilization = 0", "memory_utilization = 2",
                                         "memory_utilization = nan", "memory_utilization = -1"],
            "max_prefill_tokens = 2048": ["max_prefill_tokens = 0", f"max_prefill_tokens = "
                                          f"{10**30}", "max_prefill_tokens = 'x'"],
            "step_overhead_us = 0": ["step_overhead_us = -5", "step_overhead_us = inf"],
            'batching = "continuous"': ['batching = "psychic"'],
            'device_kinds = ["gpu", "accelerator", "cpu"]': ["device_kinds = []",
                                                             'device_kinds = ["toaster"]'],
            'attention = "fused"': ['attention = 7'],
            'learned_from = "pytorch-eager"': ['learned_from = "mine"',
                                               'learned_from = "../../x"']}
    bodies: dict[str, bytes | str] = {"valid own": own, "shadows vllm": RUNTIME,
                                      "no serving": own.split("[serving]")[0]}
    for old, news in swap.items():
        for new in news:
            bodies[new] = own.replace(old, new, 1)
    bodies.update(_toml_junk())
    return bodies


def _runtime_profiles() -> Iterator[Case]:
    commands = (("runtimes", "list"), ("runtimes", "show", "mine"),
                ("llm", "llama-3.1-8b", "--hw", "h100-sxm", "--runtime", "mine"))
    yield from _user_file_cases("runtime-profiles", "runtimes/mine.toml", _runtime_bodies(),
                                commands)


# ------------------------------------------------------------------------- models and data
def _models_data() -> Iterator[Case]:
    evil = (("link", "data/models/evil", "{fence}"),)
    active = (("link", "data/models/active", "/etc/passwd"),)
    for name in ("evil", "../fence", "/etc", "..", ".", "", " ", "default", "active",
                 "\x1b[2J", "x" * 300, "nope", "evil/..", "a/b"):
        for verb in ("use", "remove"):
            yield Case("models-data", f"models {verb} {name[:30]!r}", ("models", verb, name),
                       evil)
    yield Case("models-data", "models list with active -> /etc/passwd", ("models", "list"),
               active)
    yield Case("models-data", "models use with active -> /etc/passwd",
               ("models", "use", "default"), active)
    yield Case("models-data", "models folder is a file", ("models", "list"),
               (("file", "data/models", b"x"),))
    yield Case("models-data", "metadata lists fence files", ("models", "remove", "m"),
               (("file", "data/models/m/metadata.json",
                 json.dumps({"files": ["../../../fence/secret.toml", "/etc/passwd"]}).encode()),))
    for name, files in _special_files("work/out.csv").items():
        yield Case("models-data", f"data export to {name}", ("data", "export", "{work}/out.csv"),
                   files)
    for out in ("{work}/x.txt", "{work}/nope/x.csv", "/dev/null", "{work}", "{work}/.csv",
                "{work}/x.CSV", "{work}/x.parquet"):
        yield Case("models-data", f"data export {out}", ("data", "export", out))
    for name, files in _special_files("work/d").items():
        yield Case("models-data", f"partitioned export to {name}",
                   ("data", "export", "--format", "parquet", "--partition-by", "device",
                    "--output", "{work}/d"), files)
    for name, body in {"empty": b"", "binary": bytes(range(256)) * 50,
                       "header only": b"model,device\n", "formula": b"=cmd|' /C calc'!A0\n",
                       "huge field": b"a\n" + b"x" * 2_000_000 + b"\n"}.items():
        yield Case("models-data", f"data import {name}", ("data", "import", "{work}/m.csv"),
                   (("file", "work/m.csv", body),))
    for name, files in _special_files("work/m.csv").items():
        yield Case("models-data", f"data import {name}", ("data", "import", "{work}/m.csv"),
                   files)
    for value in ("", ",,,", "bundled,bundled", "nope", "../fence", "/etc/passwd", " , "):
        yield Case("models-data", f"train --from {value!r}",
                   ("train", "--from", value, "--quick", "--no-save"))
    for flag, value in (("--limit", "-1"), ("--limit", str(10**30)), ("--device", "\x1b[2J"),
                        ("--store", "{fence}/secret.toml"), ("--store", "/dev/zero"),
                        ("--store", "{work}")):
        yield Case("models-data", f"data list {flag} {value[:20]!r}", ("data", "list", flag,
                                                                      value))


# ------------------------------------------------------------------------- Python API
def _python_api() -> Iterator[Case]:
    calls = []
    for value in ("42", "None", "[]", "['hgx-h100']", "123", "''", "{'a': 1}", "b'x'",
                  "float('nan')", "'/etc/passwd'"):
        calls += [f"roofcast.llm('llama-3.1-8b', {value})",
                  f"roofcast.llm('llama-3.1-8b', 'h100-sxm', system={value})",
                  f"roofcast.plan('llama-3.1-8b', {value}, global_batch=64)",
                  f"roofcast.predict({value}, 'h100-sxm')",
                  f"roofcast.compare('resnet50', {value})"]
    for value in ("0", "-8", "64.5", "float('nan')", "'64'", "True", "10**30", "2**31"):
        calls += [f"roofcast.plan('llama-3.1-8b', 'hgx-h100', global_batch={value})",
                  f"roofcast.llm('llama-3.1-8b', 'h100-sxm', input_tokens={value})",
                  f"roofcast.llm('llama-3.1-8b', 'h100-sxm', batch={value})",
                  f"roofcast.predict('resnet50', 'h100-sxm', batch={value})",
                  f"roofcast.plan('llama-3.1-8b', 'hgx-h100', global_batch=64, "
                  f"seq_tokens={value})",
                  f"roofcast.predict_parallel('gpt2', system='hgx-h100', global_batch={value})",
                  f"roofcast.sweep('resnet50', ['t4'], [{value}])",
                  f"roofcast.predict('resnet50', 'xeon-8380', threads={value})"]
    calls += ["roofcast.sweep('resnet50', 't4')", "roofcast.train(sources='bundled')",
              "roofcast.train(sources=[])", "roofcast.system(42)", "roofcast.device(None)",
              "roofcast.load_model('/etc/passwd')", "roofcast.load_model('{fence}/m.onnx')",
              "roofcast.advise('resnet50', 'h100-sxm', objective='nope')",
              "roofcast.plan('llama-3.1-8b', hw='rtx-3090', devices=8000000000000, "
              "global_batch=64)"]
    for call in calls:
        yield Case("python-api", call, api=call)


# ------------------------------------------------------------------------- LLM / HF configs
def _hf_bodies() -> dict[str, bytes]:
    swaps = {"hidden_size": [0, -1, 2**40, 4095.5, "x", None, [1], 4097],
             "num_hidden_layers": [0, -3, 10**9, 1e308, "32"],
             "num_attention_heads": [0, 7, 2**31, -32],
             "vocab_size": [0, 10**15, -1], "intermediate_size": [0, -1, 10**18],
             "max_position_embeddings": [0, -1, 10**30], "model_type": ["nope", 5, ""],
             "num_key_value_heads": [0, 5, 64, -1], "torch_dtype": ["complex128", 3]}
    bodies = {}
    for key, values in swaps.items():
        for value in values:
            bodies[f"{key}={value!r}"[:40]] = json.dumps({**HF, key: value}).encode()
    bodies.update({"nan": json.dumps({**HF, "hidden_size": float("nan")}).encode(),
                   "array": b"[1, 2]", "null": b"null", "empty": b"", "bom":
                   b"\xef\xbb\xbf" + json.dumps(HF).encode(), "deep": b"[" * 100_000,
                   "dup keys": b'{"hidden_size": 1, "hidden_size": 2}', "binary": bytes(256),
                   "30 MB": b'{"x": "' + b"a" * 30_000_000 + b'"}',
                   "missing all": b"{}", "moe": json.dumps(
                       {**HF, "num_local_experts": 10**9, "num_experts_per_tok": 0}).encode()})
    return bodies


def _llm_config() -> Iterator[Case]:
    commands = (("llm", "{work}/cfg.json", "--hw", "h100-sxm"),
                ("plan", "{work}/cfg.json", "--system", "hgx-h100", "--global-batch", "64"))
    for name, body in _hf_bodies().items():
        for argv in commands:
            yield Case("llm-config", f"{name} | {argv[0]}", argv,
                       (("file", "work/cfg.json", body),))
    for name, files in _special_files("work/cfg.json").items():
        yield Case("llm-config", f"config is {name}", commands[0], files)
    folder = ("llm", "{work}/m", "--hw", "h100-sxm")
    yield Case("llm-config", "folder without config", folder, (("dir", "work/m", ""),))
    yield Case("llm-config", "folder config links out", folder,
               (("link", "work/m/config.json", "/etc/passwd"),))
    for ref in ("llm:/etc/passwd", "/etc", "../fence/c.json", "{fence}", "\x1b[2J", "x" * 5000):
        yield Case("llm-config", f"model ref {ref[:30]!r}", ("llm", ref, "--hw", "h100-sxm"))


# ------------------------------------------------------------------------- CLI numbers
def _cli_numbers() -> Iterator[Case]:
    flags = {
        ("predict", "resnet50", "--hw", "h100-sxm"): ("--batch", "--top"),
        ("predict", "resnet50", "--hw", "xeon-8380"): ("--threads",),
        ("llm", "llama-3.1-8b", "--hw", "h100-sxm"): ("--input-tokens", "--output-tokens",
                                                      "--batch", "--concurrency"),
        ("plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch", "64"):
            ("--seq", "--output-tokens", "--top"),
        ("sweep", "resnet50", "--hw", "t4"): ("--batches",),
        ("sweep", "{work}/s.toml", "--output", "{work}/o"): ("--cells-per-task",),
        ("measure", "--micro", "gemm", "--quick", "--repeats", "1", "--warmup", "0",
         "--no-save"): ("--threads", "--inter-op-threads"),
        ("data", "list"): ("--limit",),
    }
    for argv, names in flags.items():
        for flag in names:
            for value in BAD_NUMBERS:
                yield Case("cli-numbers", f"{argv[0]} {flag} {value[:25]!r}",
                           (*argv, flag, value), (("file", "work/s.toml", SPEC.encode()),))
    budgets = {"BATCH": ("predict", "resnet50", "--hw", "h100-sxm", "--batch", "8"),
               "THREADS": ("predict", "resnet50", "--hw", "xeon-8380", "--threads", "4"),
               "TOKENS": ("llm", "llama-3.1-8b", "--hw", "h100-sxm"),
               "DEVICES": ("plan", "llama-3.1-8b", "--system", "hgx-h100", "--global-batch",
                           "64"),
               "GLOBAL_BATCH": ("plan", "llama-3.1-8b", "--system", "hgx-h100",
                                "--global-batch", "64"),
               "DIM": ("predict", "bert_base", "--hw", "h100-sxm", "--dim", "sequence=128"),
               "TASK_CELLS": ("sweep", "{work}/s.toml", "--output", "{work}/o")}
    for budget, argv in budgets.items():
        for value in ("abc", "0", "-5", "1e3", str(10**30), " "):
            yield Case("cli-numbers", f"ROOFCAST_MAX_{budget}={value[:12]!r}", argv,
                       (("file", "work/s.toml", SPEC.encode()),),
                       env=((f"ROOFCAST_MAX_{budget}", value),))


SURFACES: dict[str, Callable[[], Iterator[Case]]] = {
    "sweep-spec": _sweep_spec, "sweep-output": _sweep_output, "plan-flags": _plan_flags,
    "user-systems": _user_systems, "runtime-profiles": _runtime_profiles,
    "models-data": _models_data, "python-api": _python_api, "llm-config": _llm_config,
    "cli-numbers": _cli_numbers}


def cases(surfaces: tuple[str, ...] = tuple(SURFACES)) -> list[Case]:
    """Every case of ``surfaces``, in a fixed order."""
    return [case for s in surfaces for case in SURFACES[s]()]


# ------------------------------------------------------------------------- sandbox and run
def _fill(text: str, root: Path) -> str:
    for name in FOLDERS:
        text = text.replace("{" + name + "}", str(root / name))
    return text


def _sandbox(base: Path, case: Case) -> Path:
    """A fresh sandbox: the folders, the fence's canaries, the user's files, the case's files."""
    root = Path(tempfile.mkdtemp(prefix="case-", dir=base)) / "s"
    for name in FOLDERS:
        (root / name).mkdir(parents=True)
    fence = root / "fence"
    (fence / "secret.toml").write_text("id = 'secret'\n")
    (fence / "sub").mkdir()
    (fence / "sub" / "b.txt").write_text("keep")
    (fence / "m.onnx").write_bytes(_tiny_onnx())
    (fence / "c.json").write_text(json.dumps(HF))
    (fence / "_roofcast_sweep.json").write_text("{}")
    (root / "work" / "mine").mkdir()
    (root / "work" / "mine" / "notes.txt").write_text("the user's notes")
    for kind, rel, payload in case.files:
        _make(root, kind, root / rel, payload)
    return root


def _tiny_onnx() -> bytes:
    """A one-Relu ONNX model (the fence's model file)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph).SerializeToString()


def _make(root: Path, kind: str, path: Path, payload: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        path.write_bytes(payload if isinstance(payload, bytes) else payload.encode())
    elif kind == "link":
        path.symlink_to(_fill(str(payload), root))
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir(exist_ok=True)


def _tree(path: Path) -> dict[str, str]:
    """Relative path -> what it is (link target, or size and hash of a file, or folder)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            rel = str(p.relative_to(path))
            if p.is_symlink():
                out[rel] = "link " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
            else:
                out[rel] = "dir" if p.is_dir() else "other"
    return out


def _canaries(root: Path) -> dict[str, object]:
    return {"fence": _tree(root / "fence"), "mine": _tree(root / "work" / "mine"),
            "top": sorted(os.listdir(root)), "parent": sorted(os.listdir(root.parent)),
            "repo": sorted(os.listdir(REPO))}


def _env(root: Path, case: Case) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"),
           "XDG_CONFIG_HOME": str(root / "home/.config"),
           "XDG_CACHE_HOME": str(root / "home/.cache"),
           "XDG_DATA_HOME": str(root / "home/.local/share"),
           "ROOFCAST_DATA_DIR": str(root / "data"), "ROOFCAST_HW_DIR": str(root / "hw"),
           "ROOFCAST_SYSTEMS_DIR": str(root / "systems"),
           "ROOFCAST_RUNTIME_DIR": str(root / "runtimes"),
           "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    if "ROOFCAST_SHARED_DATA" in os.environ:
        env["ROOFCAST_SHARED_DATA"] = os.environ["ROOFCAST_SHARED_DATA"]
    env.update({k: _fill(v, root) for k, v in case.env})
    return env


def _argv(root: Path, case: Case) -> list[str]:
    if case.api is None:
        return [_fill(a, root) for a in case.argv]
    script = root / "work" / "api_case.py"
    script.write_text(API_WRAPPER.format(call=_fill(case.api, root)))
    return ["--script", str(script)]


ERROR_LINE = re.compile(r"^roofcast[\w -]*: error: ")


def error_lines(stderr: str) -> list[str]:
    """The error message's lines: from the first ``roofcast COMMAND: error:`` line to the end
    (warnings and notes before it are not the error)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    first = next((i for i, line in enumerate(lines) if ERROR_LINE.match(line)), None)
    return lines if first is None else lines[first:]


def judge(case: Case, rc: int, hung: bool, stderr: str, before: dict, after: dict) -> list[str]:
    """What is wrong with how a case ended (module docstring); [] when clean."""
    problems = []
    if hung:
        problems.append(f"hang (> {TIMEOUT_S:g} s)")
    elif rc not in (0, 2):
        problems.append(f"exit {rc}")
    if "Traceback" in stderr:
        problems.append("traceback")
    if any(m in stderr for m in ("MemoryError", "bad_alloc", "Cannot allocate memory")):
        problems.append("memory")
    if rc == 2 and len(error_lines(stderr)) != 1:
        problems.append(f"{len(error_lines(stderr))} error lines")
    for key in before:
        if before[key] != after[key]:
            problems.append(f"changed outside: {key}")
    return problems


def run_case(runner, base: Path, case: Case) -> Result:
    root = _sandbox(base, case)
    try:
        argv = _argv(root, case)
        before = _canaries(root)
        out, err = root.parent / "stdout", root.parent / "stderr"
        rc, _, hung, seconds = runner(argv, root / "work", _env(root, case), (out, err),
                                      MEM_GIB, TIMEOUT_S)
        after = _canaries(root)
        stderr = err.read_text(errors="replace")
        before["parent"] = [n for n in before["parent"] if n not in ("stdout", "stderr")]
        after["parent"] = [n for n in after["parent"] if n not in ("stdout", "stderr")]
        problems = judge(case, rc, hung, stderr, before, after)
        last = (stderr.strip().splitlines() or [""])[-1][:200]
        return Result(case, rc, problems, last, seconds)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def run_all(corpus: list[Case], jobs: int) -> list[Result]:
    base = Path(tempfile.mkdtemp(prefix="roofcast-hostile-corpus-"))
    try:
        with fork_pool(jobs) as servers, ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(lambda c: run_case(servers.run_cli, base, c), corpus))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(results: list[Result]) -> str:
    lines = [f"{'surface':<18}{'inputs':>8}{'clean':>8}{'not clean':>11}"]
    for surface in dict.fromkeys(r.case.surface for r in results):
        rows = [r for r in results if r.case.surface == surface]
        bad = sum(1 for r in rows if r.problems)
        lines.append(f"{surface:<18}{len(rows):>8}{len(rows) - bad:>8}{bad:>11}")
    bad = [r for r in results if r.problems]
    lines.append(f"{'all':<18}{len(results):>8}{len(results) - len(bad):>8}{len(bad):>11}")
    lines += ["", "not clean:"] if bad else []
    for r in bad:
        name = ascii(r.case.name)[:90]
        lines.append(f"  {r.case.surface} | {name} | rc={r.rc} {', '.join(r.problems)} | "
                     f"{ascii(r.last)[:160]}")
    slow = sorted(results, key=lambda r: -r.seconds)[:5]
    lines += ["", "slowest: " + "; ".join(f"{ascii(r.case.name)[:50]} {r.seconds:.1f} s"
                                         for r in slow)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="fork servers at once (default 2)")
    ap.add_argument("--surface", action="append", choices=tuple(SURFACES),
                    help="only these surfaces (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the cases, run nothing")
    ap.add_argument("--json", type=Path, metavar="FILE",
                    help="also write every case's outcome to FILE (one JSON object a line)")
    args = ap.parse_args()
    corpus = cases(tuple(args.surface or SURFACES))
    if args.list:
        for c in corpus:
            print(f"{c.surface}\t{ascii(c.name)[:100]}")
        print(f"{len(corpus)} cases")
        return 0
    results = run_all(corpus, args.jobs)
    print(report(results))
    if args.json is not None:
        args.json.write_text("".join(json.dumps(
            {"surface": r.case.surface, "name": r.case.name, "rc": r.rc,
             "problems": r.problems, "last": r.last, "seconds": round(r.seconds, 2)}) + "\n"
            for r in results))
    return 0 if not any(r.problems for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
