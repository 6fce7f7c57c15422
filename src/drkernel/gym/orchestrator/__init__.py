"""The orchestrator: no torch, no solution code. It schedules, relays and decides."""
