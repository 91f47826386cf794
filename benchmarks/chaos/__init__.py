"""Fault injection with an independent checker: nothing lost, nothing doubled (`make chaos`)."""
