"""Image resizing and cropping ops: upsampling, resizing, crops and l2 pooling."""

from __future__ import annotations
