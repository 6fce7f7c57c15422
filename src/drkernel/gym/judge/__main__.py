"""``python -m drkernel.gym.judge``: the judge child's entry point."""

from drkernel.gym.judge.main import main

main()
