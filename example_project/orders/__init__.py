"""The orders app: a few periodic housekeeping tasks."""
