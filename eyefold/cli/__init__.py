"""The ``eyefold`` command line and the text it shows people.

- :mod:`.main`: argument wiring of ``optimize``, ``inspect`` and ``rules``;
- :mod:`.process`: the ``eyefold`` process around it (how it exits);
- :mod:`.batch`: ``optimize IN... --output-dir DIR``;
- :mod:`.summary` and :mod:`.batch_summary`: the tables and lines printed.

Importing it stays light (no onnx, onnx-ir or numpy) so ``eyefold --version`` is quick.
"""

from eyefold.cli.main import main

__all__ = ["main"]
