"""The judge child (trusted, one per device): reference, inputs, comparisons, reference timing."""
