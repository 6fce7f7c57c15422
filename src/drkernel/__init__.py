"""drkernel: KernelGym, a multi-turn kernel agent and Dr. Kernel RL for Triton kernel generation."""

__version__ = "0.1.0"
__all__ = ["__version__"]
