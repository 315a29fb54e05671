"""Fake model-provider servers that the real agent CLIs talk to in end-to-end tests."""
