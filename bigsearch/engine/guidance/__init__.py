"""Helpers sessions use beside a method: cold starts (seeding) and estimates of the
positives left (remaining)."""
