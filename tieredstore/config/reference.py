"""The reference configuration file, shipped in the package beside this module.

``tieredstore.toml`` lists every key with its default and meaning (a test keeps
it in step with :class:`~tieredstore.config.TieredStoreConfig`). It is package
data, so an installed wheel has it at :data:`REFERENCE_FILE`, and errors that
send the reader to it name that path. Nothing loads it by default: the code's
defaults are the same values.
"""

from __future__ import annotations

from pathlib import Path

REFERENCE_FILE = Path(__file__).resolve().with_name("tieredstore.toml")
"""Where this installation's reference configuration file is."""
