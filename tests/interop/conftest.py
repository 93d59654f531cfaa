"""The hf extra's tests never reach the network, and transformers' copies of a folder's modeling code go to a
temporary folder, not the user's cache. Set before any test here imports transformers (it reads them at import)."""

import os
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="glm53-hf-modules-"))
