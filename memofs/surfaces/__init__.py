"""Surfaces: what users and agents touch: the CLI, the MCP server and generated agent files."""
