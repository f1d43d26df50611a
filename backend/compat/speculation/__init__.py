"""Patches for speculative decoding: drafts, their schedule, the drafter and its metrics."""
