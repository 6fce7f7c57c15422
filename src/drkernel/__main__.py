"""`python -m drkernel` runs the `drkernel` command."""

from drkernel.cli import main

main()
