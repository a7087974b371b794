"""The search methods, one module each (and what only one method uses, beside it). Each is
listed in engine/core/registry.py; they build on engine/core and engine/pruning."""
