"""Sink bolts that store acked output."""
