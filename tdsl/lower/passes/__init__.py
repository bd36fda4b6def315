"""Loop-IR passes, one per module, each with one public entry function."""
