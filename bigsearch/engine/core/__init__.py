"""The contracts and machinery every search method shares: the search base classes, the
parameters records, the registry of methods, selection, chunk steps, rank updates and
streaming k-means. Nothing here imports a method (engine/methods) or pruning."""
