"""PySpark pipeline over many stored runs."""
