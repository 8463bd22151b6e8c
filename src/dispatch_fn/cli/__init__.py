"""The command line only (``python -m dispatch_fn``); never shipped in the Lambda artifact."""
