"""The Spark glue: the session, the function each Spark task runs, DataFrame and streaming
sources, Spark's failures as flintlock errors."""
