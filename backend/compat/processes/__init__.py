"""Patches for the engine's processes, start-up, memory and steps."""
