"""``python -m eyefold`` is the ``eyefold`` command."""

from eyefold.cli.process import run

run()
