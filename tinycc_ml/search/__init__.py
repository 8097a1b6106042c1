"""The search behind ``tinycc_ml.fit``: candidates (families and size ladders), measurement on the
target, the Pareto front and the choice, the plot. ``tinycc_ml.search.fit.fit`` is the entry point."""
