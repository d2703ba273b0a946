"""Graph: entity extraction from memory text and the entity graph that expands queries."""
