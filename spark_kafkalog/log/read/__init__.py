"""Reading a log: discovery (``LogDirs``), the batch scan, seeking, read_committed,
partition state and the record reader. Import from the modules (``read.discovery``,
``read.scan``, ``read.seek``, ``read.isolation``, ``read.state``, ``read.reader``)."""
