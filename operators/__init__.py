"""flintlock's operator library: plain classes over the core operator API."""
