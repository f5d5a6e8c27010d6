"""telapa: continual reinforcement learning with latent-aligned policy archives."""

__version__ = "0.1.0"
