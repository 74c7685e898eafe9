"""Nemeses: fault schedules and the partition shapes every backend applies the same way."""
