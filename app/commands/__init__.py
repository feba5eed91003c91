"""One module per ``roofcast`` subcommand, each with ``register(subparsers)``."""
