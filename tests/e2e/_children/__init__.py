"""Child processes (and the parent side of them) for the end-to-end crash tests."""
