"""``python -m drkernel.gym.candidate``: the candidate child's entry point."""

from drkernel.gym.candidate.main import main

main()
