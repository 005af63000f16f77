"""Ray Serve applications."""
