"""Sources: the Source API read at a source task's head, unbounded sources' epochs, and the
Parquet and sequence sources."""
