"""The pure core: no I/O, no clock, no environment. Values in, values out."""
