"""The drover command line: one module per command group, output through drover.cli.output.Output."""
