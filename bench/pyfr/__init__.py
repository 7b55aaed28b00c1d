"""PyFR's CUDA provider replayed on a device (walks, in context, start-up)
and PyFR end to end."""
