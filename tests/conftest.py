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

# The tests compile the same programs over and over (each placement jits its own closures, so
# jax's in-memory caches miss): JAX's persistent compilation cache, in a folder of the
# session's own removed at exit, lets every repeat load the program instead of compiling it.
# The launchers the tests start keep their own (--cache_dir, --nocache) as users' runs do.
import jax  # noqa: E402 (after XLA_FLAGS, which the backend reads when it starts)

_COMPILED = tempfile.mkdtemp(prefix="saberjax-test-xla-")
atexit.register(shutil.rmtree, _COMPILED, ignore_errors=True)
jax.config.update("jax_compilation_cache_dir", _COMPILED)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
