"""A decommission's and a demote's decisions (``flow``). Pure."""
