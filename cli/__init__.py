"""The drover command line: one module per command group, output through cli.output.Output."""
