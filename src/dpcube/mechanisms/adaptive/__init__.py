"""Data-adaptive mechanisms: AHP (Zhang, Chen, Xu, Meng, Xie, SDM 2014) and MWEM (Hardt,
Ligett, McSherry, NIPS 2012). Their estimates depend on the data through noisy measurements
only, so they are biased: their answers get model-based intervals, never trusted ones."""

from dpcube.mechanisms.adaptive.ahp import AHP
from dpcube.mechanisms.adaptive.mwem import MWEM

__all__ = ["AHP", "MWEM"]
