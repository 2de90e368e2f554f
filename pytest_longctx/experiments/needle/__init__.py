"""Non-literal needles (after NoLiMa), distractors and coherence (after Context Rot), and abstention: our own data."""
