"""Privelet and Privelet+: wavelet-based releases for range-count queries (Xiao, Wang, Gehrke 2010)."""

from dpcube.mechanisms.privelet.mechanism import Privelet, PriveletPlus, PriveletVariance

__all__ = ["Privelet", "PriveletPlus", "PriveletVariance"]
