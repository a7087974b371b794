"""Pruning: bounds that let a pass skip the blocks of a store that cannot hold the best
point (LAS and WNAS), and the block summaries saved with a store."""
