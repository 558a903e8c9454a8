# lit configuration for Tessera's text tests: each .ir (tile IR) or .ll (LLVM IR) file under
# tests/lit runs its RUN lines through tessera-opt (and the other tessera-* tools) and checks
# the output with FileCheck.
#
#   python3 -m lit -sv tests/lit --param tessera_opt=build/bin/tessera-opt
#
# Substitutions: %tessera-opt, plus %<tool> for every other tessera-* executable beside it.
# ruff: noqa: F821  (lit provides `config` and `lit_config`)
import os
import shutil

import lit.formats

config.name = "tessera"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir", ".ll"]  # .ll: LLVM IR, for the passes over LLVM IR
config.test_source_root = os.path.dirname(os.path.abspath(__file__))


def find_tessera_opt() -> str:
    given = lit_config.params.get("tessera_opt")
    repo = os.path.dirname(os.path.dirname(config.test_source_root))
    candidates = (
        [given] if given else [os.path.join(repo, "build", "bin", "tessera-opt")]
    )
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return os.path.abspath(path)
    lit_config.fatal(
        f"tessera-opt not found (tried {candidates}); pass --param tessera_opt=<path>"
    )


def find_filecheck_dir() -> str:
    for directory in ("/usr/lib/llvm-22/bin",):
        if os.access(os.path.join(directory, "FileCheck"), os.X_OK):
            return directory
    found = shutil.which("FileCheck")
    if not found:
        lit_config.fatal("FileCheck not found: install llvm-22-tools (make setup)")
    return os.path.dirname(found)


tessera_opt = find_tessera_opt()
tools_dir = os.path.dirname(tessera_opt)
# Temporary files (%t) go beside the build, not into the source tree.
config.test_exec_root = os.path.join(os.path.dirname(tools_dir), "lit")
# Longest names first, so that %tessera-opt does not eat the front of a longer tool name.
for tool in sorted(os.listdir(tools_dir), key=len, reverse=True):
    if tool.startswith("tessera-") and os.access(
        os.path.join(tools_dir, tool), os.X_OK
    ):
        config.substitutions.append(("%" + tool, os.path.join(tools_dir, tool)))

# FileCheck (and `not`, which lit's internal shell provides) are found on PATH.
config.environment["PATH"] = os.pathsep.join(
    [
        find_filecheck_dir(),
        tools_dir,
        config.environment.get("PATH", os.environ["PATH"]),
    ]
)
