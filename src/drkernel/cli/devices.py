"""The check that a device named on the command line exists on this machine, before any work starts.

Without it `--device cuda` on a CPU build of torch reaches the judge process and fails there with a raw
traceback (``module 'torch._C' has no attribute '_cuda_setDevice'``); the CLI turns this
`ConfigError` into a one-line message and exit code 2.
"""

from __future__ import annotations

from drkernel.errors import ConfigError


def require_local_device(name: str) -> None:
    """Raise `ConfigError` when ``name`` (auto, cpu, cuda, cuda:N) names a CUDA device this machine lacks.

    ``auto`` and ``cpu`` always pass, without importing torch: auto falls back to the CPU. Other
    spellings are left to `EvalConfig`'s own validation.
    """
    if not (name == "cuda" or name.startswith("cuda:")):
        return
    import torch  # here, not at the top: `drkernel gym eval --device auto` then never imports it (~3.5 s)

    if not torch.cuda.is_available():
        build = ("this torch build has no CUDA support" if torch.version.cuda is None
                 else "no CUDA device is visible")
        raise ConfigError(
            f"--device {name}: CUDA is not available ({build}, torch {torch.__version__}); "
            "use --device cpu, or install a CUDA build of torch (TORCH_SPEC, see the Makefile)"
        )
    index = name.partition(":")[2]
    if index.isdigit() and int(index) >= torch.cuda.device_count():
        raise ConfigError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) visible")
