"""Modal screens: help, chats list, text prompts."""
