"""Patches for the packages beside vLLM: torchvision, the audio tower, the compile cache, the CLI."""
