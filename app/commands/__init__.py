"""One module per `gemma-chat` subcommand."""
