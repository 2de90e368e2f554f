"""Experiments packaged as plugins: each subpackage holds one experiment's data, prompts, scoring and figures."""
