"""``fluxgate connect <file>``: run the Fluxgate service that does a Stream-Reactor connector's job."""
