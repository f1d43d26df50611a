"""Settings and the files and folders gemma-chat reads and keeps: the config file and environment,
the cache and data folders, bounded reads of files a user or an earlier run left, and the small JSON
cache files."""
