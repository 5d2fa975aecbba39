"""The MCP server: tools that call the SQL retrieval functions."""
