"""The model an engine runs: where its checkpoint and drafter are, and what they need in memory."""
