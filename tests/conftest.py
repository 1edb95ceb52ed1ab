import atexit
import os
import pathlib
import shutil
import sys
import tempfile

# Two host devices, so that the tests exercise chunks spread over several devices.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=2").strip()
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# Launchers cache corpora (saberjax.corpus.cache): the tests' entries go to a folder of their
# own, removed at exit, never into the user's cache directory.
os.environ["SABERJAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="saberjax-test-cache-")
atexit.register(shutil.rmtree, os.environ["SABERJAX_CACHE_DIR"], ignore_errors=True)
