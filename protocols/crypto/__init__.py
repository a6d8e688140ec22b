"""Small cryptographic primitives (Flower-style split): key agreement, AEAD, PRG, Shamir."""
