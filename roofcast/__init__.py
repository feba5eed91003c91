"""roofcast: performance prediction and what-if simulation for deep learning models.

The repository's top-level folders (``graph_import``, ``hw_catalog``, ``predictor``,
``training_data``, ``app``) install as subpackages of this one package.
"""

__version__ = "0.1.0"
