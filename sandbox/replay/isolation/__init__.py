"""The replayed process and its isolation: the environment it sees, the network guard and the
redirection of its clients to the sandbox, what an imported run may run on this host,
processes started live under the frozen clock, and the agent run inside the runner
container."""
