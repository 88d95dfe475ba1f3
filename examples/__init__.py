"""Runnable examples, one per seed scenario; each is also a recorded test."""
