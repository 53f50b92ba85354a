"""The service layer: use cases over the ports."""
