"""gemma-chat: the user-facing side (command line and Textual UI)."""

__version__ = "0.1.0"
