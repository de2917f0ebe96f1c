"""The `tiledsl` command (main) and what its subcommands share: which configs a kernel runs
with (configs), the per-kernel hooks of a kernel file (file_hooks), and the files they write
(outputs)."""

from tiledsl.cli.main import main

__all__ = ["main"]
