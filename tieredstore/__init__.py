"""tieredstore: a message store's commit log on S3 and compatible object stores."""

from tieredstore.config import TieredStoreConfig, load_config
from tieredstore.errors import Corrupt, Fenced, TieredStoreError

__version__ = "0.1.0"

__all__ = ["Corrupt", "Fenced", "TieredStoreConfig", "TieredStoreError", "__version__",
           "load_config"]
