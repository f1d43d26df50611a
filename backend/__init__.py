"""gemma-chat's engine side: engine, chat formatting, checkpoints, metrics, persistence.

Never imports textual, rich or ``app`` (tests/test_import_hygiene.py checks it), and keeps
torch and vllm imports lazy so importing it is instant.
"""
