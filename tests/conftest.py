import os
import pathlib
import sys

# Two host devices, so that the tests exercise chunks spread over several devices.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=2").strip()
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
