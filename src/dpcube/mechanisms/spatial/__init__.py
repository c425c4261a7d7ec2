"""Location histograms: HTF (Shaham, Ghinita, Ahuja, Krumm, Shahabi,
SIGSPATIAL 2021) and the spatial baselines.

See ``docs/location.md``. Every mechanism here takes a histogram
over one spatial attribute (or two ordinal attributes) and returns a
:class:`~dpcube.mechanisms.spatial.release.LeafRelease` of rectangles with noisy counts
(``Singular`` returns a per-cell release).
"""

from dpcube.mechanisms.spatial.grids import AdaptiveGrid, Singular, Uniform, UniformGrid
from dpcube.mechanisms.spatial.htf import HTF
from dpcube.mechanisms.spatial.privtree import PrivTree
from dpcube.mechanisms.spatial.release import Leaf, LeafRelease
from dpcube.mechanisms.spatial.trees import KDTree, QuadTree
from dpcube.mechanisms.spatial.users import bound_contributions

__all__ = [
    "HTF",
    "AdaptiveGrid",
    "KDTree",
    "Leaf",
    "LeafRelease",
    "PrivTree",
    "QuadTree",
    "Singular",
    "Uniform",
    "UniformGrid",
    "bound_contributions",
]
