"""The `tiledsl` command: its subcommands and `main` (commands.py), and what they share: what a
command reads (inputs), which configs a kernel runs with (configs), a kernel file's per-kernel
hooks (file_hooks) and the files they write (outputs)."""

from tiledsl.cli.commands import main

__all__ = ["main"]
