"""Torch-free judgement: static checks, verdict checks, the hack catalogue, coverage arithmetic."""
