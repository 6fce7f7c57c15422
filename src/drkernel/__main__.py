"""`python -m drkernel` runs the `drkernel` command."""

from drkernel.cli import main

if __name__ == "__main__":  # spawned worker processes re-import this module and must not run the CLI
    main()
