from fluxgate_aggregator.app import cli

cli()
