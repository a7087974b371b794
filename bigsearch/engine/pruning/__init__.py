"""Pruning: bounds that let a pass skip the blocks of a store that cannot hold the best
point (LAS, WNAS, BLR and screen), and the block summaries saved with a store. contract.py writes
down what a search gives its pruning and what a pruning offers it."""
