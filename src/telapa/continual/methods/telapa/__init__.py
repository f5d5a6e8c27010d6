"""TeLAPA (paper Sec. 3.2-3.3, App. D-E): illumination into per-task archives, few-shot
transfer-origin selection, and online latent-space maintenance, as a continual method."""
