"""``roofcast app [--port N] [--address HOST]``: start the Streamlit app (headless server; open
the printed URL).

It listens on 127.0.0.1 (this machine only) unless ``--address`` says otherwise. Uploaded models
are imported and predicted in a worker process limited to 2048 MB and 60 s per call
(``$ROOFCAST_APP_WORKER_MEMORY_MB``, ``$ROOFCAST_APP_WORKER_TIMEOUT_S``). Usage statistics are
off; extra ``--server.*`` settings can be given in ``.streamlit/config.toml`` as usual.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
from pathlib import Path

APP_SCRIPT = Path(__file__).resolve().parents[1] / "streamlit_app.py"
MAX_UPLOAD_MB = 200  # = app.state.MAX_UPLOAD_MB (not imported: keeps `roofcast --help` light)
PRIMARY_COLOR = "#3B6EA8"  # the charts' blue
DEFAULT_ADDRESS = "127.0.0.1"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="start the Streamlit what-if app", description=__doc__)
    p.add_argument("--port", type=_port, metavar="N", help="port to listen on (default 8501)")
    p.add_argument("--address", type=_address, metavar="HOST", default=DEFAULT_ADDRESS,
                   help=f"address to listen on (default {DEFAULT_ADDRESS}: this machine only; "
                        "0.0.0.0 for every interface, which lets anyone who can reach this "
                        "machine use the app)")
    p.set_defaults(func=run)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} must be within 1..65535")
    return value


#: addresses that listen on every interface (a warning is printed)
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", "[::]"})
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[?[0-9A-Fa-f:.]{2,45}\]?")


def _address(text: str) -> str:
    """``--address``: an IP address or host name; an empty one (Streamlit would listen on every
    interface without a word) or one with spaces or control characters is refused."""
    if not _HOST.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an address to listen on: give an IP address or host name, e.g. "
            f"{DEFAULT_ADDRESS} (this machine only) or 0.0.0.0 (every interface)")
    return text


def streamlit_command(port: int | None = None, address: str = DEFAULT_ADDRESS) -> list[str]:
    """The command line that starts the app."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT),
           "--server.headless", "true", "--server.maxUploadSize", str(MAX_UPLOAD_MB),
           "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
           "--theme.primaryColor", PRIMARY_COLOR]
    if port is not None:
        cmd += ["--server.port", str(port)]
    cmd += ["--server.address", address]
    return cmd


def run(args: argparse.Namespace) -> int:
    if args.address in EVERY_INTERFACE:
        print(f"roofcast app: warning: --address {args.address} listens on every interface: "
              "anyone who can reach this machine can use the app", file=sys.stderr)
    proc = subprocess.Popen(streamlit_command(args.port, args.address))
    # a SIGTERM to `roofcast app` stops the server too (no orphaned Streamlit process)
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=10)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
