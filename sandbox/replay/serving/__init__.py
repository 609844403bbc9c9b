"""Serving each crossing on replay: the policies (recorded, live, spy), what a request is
matched as and the recorded event that answers it, MCP servers, and recorded responses
replaced by a fork."""
