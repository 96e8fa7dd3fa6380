"""Helpers shared by several test modules. Test modules import from here, never from each other."""
