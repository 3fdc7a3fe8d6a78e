"""The Fluxgate console: every service's state, flow, lag, stores and dead letters on one page."""
