"""Tables: the schema, frames as Arrow batches, conversion to pandas and Arrow, CSV/Parquet export."""
