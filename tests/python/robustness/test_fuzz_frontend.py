"""The front-end fuzzer (fuzz_frontend.py) in a child process, so that an abort is seen as one:
every random kernel, malformed or not, compiles or raises a CompilationError at a source
line. CI runs a few hundred examples on a fresh seed; `TESSERA_FUZZ_EXAMPLES=20000` (and
`TESSERA_FUZZ_SEED`) run the long campaign."""
import os
import random
import subprocess
import sys
from tessera.testing.environment import child_env

HERE = os.path.dirname(os.path.abspath(__file__))


def test_random_kernels_never_crash_hang_or_fail_internally():
    examples = int(os.environ.get("TESSERA_FUZZ_EXAMPLES", "400"))
    seed = int(os.environ.get("TESSERA_FUZZ_SEED", str(random.randrange(1 << 30))))
    # ~10 ms an example here: 50 ms each is far beyond any honest compile, so a hang.
    result = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_frontend.py"),
                             "--examples", str(examples), "--seed", str(seed)],
                            capture_output=True, text=True, timeout=60 + examples * 0.05,
                            env=child_env())
    assert result.returncode == 0, (f"seed {seed}: exit {result.returncode}\n"
                                    f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
    assert f"{examples} examples" in result.stdout
