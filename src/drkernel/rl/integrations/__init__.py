"""Integrations of Dr. Kernel's RL with outside trainers (``verl``)."""
