"""The trustroute command-line interface."""
