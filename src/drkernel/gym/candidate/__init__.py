"""The candidate child (one per solution, sandboxed): everything that runs next to solution code."""
