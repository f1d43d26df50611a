"""The app's engines over a session: made (factory), started and kept (pool), swapped,
warmed up, and the start history the status bar's estimate reads."""
