"""One module per CLI subcommand; each defines a click command named ``command``."""
