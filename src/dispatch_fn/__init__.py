"""Duly dispatcher: recurring duties become one task per period, once, without a lock."""
