"""How Gemma 4 speaks, in one room: rendering through the chat template (bounded), the template's
message form, reading replies and thoughts, the tool-call syntax and its typed values, and the
declarations the template writes. It imports nothing of the backend but its errors and settings."""
