"""The Little Retrieval Test: files (both protocols), its prompt, condition axes, tables and figures."""
