"""The period engine: periods in a duty's own zone, keys, due dates. Pure."""
