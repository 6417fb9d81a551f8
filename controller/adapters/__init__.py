"""Adapters: each owns one outside library or resource and translates its errors into ours."""
