"""Log maintenance offline: what a broker's log manager and cleaner do, on a log dir at
rest (retention in :mod:`.retention`)."""
