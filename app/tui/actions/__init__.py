"""The chat app's behaviour by concern, each a mixin of ``GemmaChatApp`` typed by a Protocol of
what it needs of the app: engines, turns, attachments, branches, chats, tools, quitting."""
