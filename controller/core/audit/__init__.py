"""The audit chain and the notifications its records send."""
